"""MAJOR compaction benchmark: our MAJOR versus Iceberg's bare ``rewrite_data_files`` versus a plain Parquet copy,
and the full-table scan time before/after compaction, measured side by side in one run on the same data.

The table: one CDC table built once with the seeded workload generator (``compaction.demo.workload``): format
v2, ``days(ts)`` partitions, many rounds of appends, equality deletes (CDC deletes/updates, committed through the
Iceberg Java API) and position deletes (Spark ``DELETE``/``UPDATE``/``MERGE``, file-scoped), so every partition
carries dozens of small data files and delete files. Building it takes minutes (each round is several Spark
commits), so it is built **once** (its time is reported, not part of any ratio) and every contender works on a
**clone** made with Iceberg's ``register_table`` procedure from the base table's current metadata file: the clone has
the very same snapshots, sequence numbers, data files and delete files (not copies: the same paths). Compactions of
a clone only add files (new unique names under the shared table location) and new metadata files; nothing is ever
deleted, so the base table and the other clones are untouched (the base table is never compacted). Consequence to
keep in mind: every contender reads the same, OS-cached input files (a warm-up scan runs first, so all are warm).

Contenders (each on its own fresh clone, order rotated every repeat, median of ``--repeat``; one untimed CALL and one
untimed ours(none) run first on throwaway clones, so that JVM class loading/JIT does not land on the first contender):

* ``ours_count`` / ``ours_checksum`` / ``ours_none`` - our MAJOR in-process: ``inspect_table`` + ``plan(mode=major)``
  + ``run_groups`` of all the job groups at once (their MAJOR partitions in one Iceberg rewrite action and one commit, one
  dangling-delete cleanup commit, then validation of every partition at level count / checksum / none; a group
  with a single MAJOR partition, or whose group action failed, runs per partition). This benchmark's catalog is SQLite, so the job's validation
  read-ahead (PostgreSQL and other multi-writer catalogs only: rows read in a background thread while Iceberg's
  action and our cleanup run) is off here: every validation read is in the measured main thread.
* ``call`` - the bare procedure on the whole table: ``CALL bench.system.rewrite_data_files(table => ..., options =>
  map('delete-file-threshold','1', 'remove-dangling-deletes','true', 'use-starting-sequence-number','true',
  'target-file-size-bytes', <our policy's target>))``.
* ``parquet`` - the practical limit: ``spark.read.parquet(<the data files ours rewrites>).write.parquet(tmp)`` with the
  table's Parquet codec (no deletes applied, no Iceberg metadata).
* diagnostics (``--no-diagnose`` drops them): ``call_serial`` (the CALL with ``max-concurrent-file-group-rewrites=1``)
  and ``action_per_partition`` (Iceberg's rewrite action run once per partition, sequentially, same options as the
  CALL) split our overhead into "one action per partition" vs "our scans/cleanup/validation".
* scans: ``SELECT count(*), sum(xxhash64(all columns))`` over the whole table (reads every column, applies deletes)
  on the base table (before) and on the ``ours_count`` and ``call`` clones (after), every repeat.

Correctness (the benchmark aborts otherwise): the reference reader (``icecompact_testing.oracle.read_table``) of every
compacted clone returns exactly the rows it returns for the base table, which equal the generator's own model; every
scan returns the base table's (count, checksum); every partition of ours ends ``committed``.

Our runs are instrumented with wall-clock timers wrapped around functions of ``compaction.spark.job``/``major``/
``partition_files`` (monkeypatched in this process only; nothing under ``compaction/`` is changed) to show where the
time goes (per thread: the background read-ahead is shown apart, it overlaps the main thread's phases). The
contenders, clones, timers and scans are ``bench/lib/`` (``contenders``, ``phases``, ``scans``), shared with
``bench/scale.py``.

Usage::

    .venv/bin/python bench/major.py                  # 10 rounds x 4000 rows, 4 day partitions, repeat 3
    .venv/bin/python bench/major.py --small          # quick smoke, results major_small.*
    .venv/bin/python bench/major.py --workdir /tmp/mb --keep   # keep (and later reuse) the generated base table

Results: ``bench/results/major.json`` + ``.txt`` (``major_small.*`` for ``--small``).
Absolute times are noisy: the machine has 2 cores and other people run Spark on it concurrently (load average is
recorded).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import gc
import json
import os
import pickle
import platform
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from lib.common import RESULTS_DIR, summary, timing_line  # noqa: E402  (sets sys.path, SPARK_LOCAL_IP)
from lib.contenders import CATALOG_NAME, NAMESPACE, Bench, BenchmarkError, parquet_codec, rotated  # noqa: E402
from lib.phases import breakdown_of, median_breakdown, median_phases  # noqa: E402
from lib.scans import full_scan  # noqa: E402

BASE = "base"

GOAL_OVERHEAD = 1.15  # ours(count) / CALL
GOAL_SCAN_SPEEDUP = 5.0  # scan before / scan after (ours)

OURS = {"ours_count": "count", "ours_checksum": "checksum", "ours_none": "none"}
CORE_CONTENDERS = ("ours_count", "ours_checksum", "ours_none", "call", "parquet")
DIAG_CONTENDERS = ("call_serial", "action_per_partition")


# ------------------------------------------------------------------------------------------------------------
# Base table
# ------------------------------------------------------------------------------------------------------------
def workload_spec(args: argparse.Namespace) -> Any:
    from compaction.demo.workload import WorkloadSpec

    return WorkloadSpec(
        seed=args.seed, format_version=2, partitioning="days_ts", key_columns=("id",), commits=args.commits,
        rows_per_commit=args.rows_per_commit, delete_fraction=0.03, update_fraction=0.03, reinsert_fraction=0.2,
        eq_delete_fraction=0.5, null_key_fraction=0.01, evolve_spec=False, use_equality_deletes=True,
        global_eq_deletes=False, delete_granularity="file", days_span=args.days,
    )


def build_or_reuse_base(spark: Any, catalog_cfg: Any, workdir: Path, spec: Any) -> dict[str, Any]:
    """Generate the base table (or reuse one generated earlier in ``workdir`` with the identical spec)."""
    from compaction.demo.workload import generate

    info_path = workdir / "base.json"
    rows_path = workdir / "base_model_rows.pickle"
    spec_dict = dataclasses.asdict(spec)
    spec_dict["key_columns"] = list(spec_dict["key_columns"])
    if info_path.exists() and rows_path.exists():
        info = json.loads(info_path.read_text())
        if info["spec"] == spec_dict:
            print(f"  reusing the base table generated earlier in {workdir} "
                  f"(generation took {info['generate_s']:.1f} s then)", flush=True)
            info["reused"] = True
            with rows_path.open("rb") as fh:
                info["model_rows"] = pickle.load(fh)
            return info
        raise BenchmarkError(f"{workdir} holds a base table of another workload spec; use another --workdir")
    print("  generating the CDC base table (once) ...", end="", flush=True)
    t0 = time.perf_counter()
    result = generate(spark, catalog_cfg, f"{NAMESPACE}.{BASE}", spec)
    elapsed = time.perf_counter() - t0
    print(f" {elapsed:.1f} s", flush=True)
    info = {"spec": spec_dict, "generate_s": round(elapsed, 2), "stats": dict(result.stats),
            "snapshot_id": result.snapshot_id}
    info_path.write_text(json.dumps(info, indent=2) + "\n")
    with rows_path.open("wb") as fh:
        pickle.dump(result.expected_rows, fh)
    info["reused"] = False
    info["model_rows"] = result.expected_rows
    return info


def table_summary(spark: Any, table: str) -> dict[str, Any]:
    rows = spark.sql(
        f"SELECT content, count(*) AS n, sum(record_count) AS records, sum(file_size_in_bytes) AS bytes "
        f"FROM {table}.files GROUP BY content").collect()
    by = {int(r["content"]): (int(r["n"]), int(r["records"]), int(r["bytes"])) for r in rows}
    parts = spark.sql(f"SELECT count(*) AS n FROM {table}.partitions").collect()[0]["n"]
    snaps = spark.sql(f"SELECT count(*) AS n FROM {table}.snapshots").collect()[0]["n"]
    d, p, e = by.get(0, (0, 0, 0)), by.get(1, (0, 0, 0)), by.get(2, (0, 0, 0))
    return {"partitions": int(parts), "snapshots": int(snaps),
            "data_files": d[0], "data_records": d[1], "data_bytes": d[2],
            "position_delete_files": p[0], "position_delete_records": p[1], "position_delete_bytes": p[2],
            "equality_delete_files": e[0], "equality_delete_records": e[1], "equality_delete_bytes": e[2]}


# ------------------------------------------------------------------------------------------------------------
# Contenders
# ------------------------------------------------------------------------------------------------------------
class MajorBench(Bench):
    """The shared contenders (``lib.contenders.Bench``) run by this benchmark's contender names."""

    def run_contender(self, contender: str, repeat: int) -> tuple[float, dict[str, Any], str | None]:
        if contender == "parquet":
            elapsed, details = self.run_parquet(self.workdir / f"parquet_out_{repeat}")
            return elapsed, details, None
        name = self.clone(contender)
        gc.collect()
        if contender in OURS:
            elapsed, details = self.run_ours(OURS[contender], name)
        elif contender == "call":
            elapsed, details = self.run_call(name)
        elif contender == "call_serial":
            elapsed, details = self.run_call(name, serial=True)
        elif contender == "action_per_partition":
            elapsed, details = self.run_action_per_partition(name)
        else:
            raise ValueError(contender)
        details["after"] = self.check_copy(contender, name)
        return elapsed, details, name


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", action="store_true", help="quick smoke: 4 rounds x 800 rows, 3 days, repeat 1; "
                                                         "results major_small.*")
    ap.add_argument("--commits", type=int, default=None, help="workload rounds (default 10; --small 4)")
    ap.add_argument("--rows-per-commit", type=int, default=None, help="new keys per round (default 4000; --small 800)")
    ap.add_argument("--days", type=int, default=None, help="day partitions (default 4; --small 3)")
    ap.add_argument("--repeat", type=int, default=None, help="repeats of every measurement (default 3; --small 1)")
    ap.add_argument("--seed", type=int, default=20240607)
    ap.add_argument("--no-diagnose", action="store_true",
                    help="skip the diagnostic contenders (CALL serial, Iceberg action per partition)")
    ap.add_argument("--no-warmup", action="store_true", help="skip the untimed warm-up compactions")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="work folder (catalog + warehouse); an existing base table of the same spec is reused")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--output", type=Path, default=None, help="result path stem (default bench/results/major)")
    args = ap.parse_args(argv)

    args.commits = args.commits or (4 if args.small else 10)
    args.rows_per_commit = args.rows_per_commit or (800 if args.small else 4000)
    args.days = args.days or (3 if args.small else 4)
    args.repeat = args.repeat or (1 if args.small else 3)
    if min(args.commits, args.rows_per_commit, args.days, args.repeat) < 1:
        ap.error("--commits, --rows-per-commit, --days and --repeat must be >= 1")
    stem = args.output or (RESULTS_DIR / ("major_small" if args.small else "major"))
    stem.parent.mkdir(parents=True, exist_ok=True)

    from compaction.catalog import CatalogConfig
    from compaction.core.planner import plan
    from compaction.core.policy import CompactionPolicy
    from compaction.metadata.inspect import inspect_table
    from compaction.spark.session import SparkSettings, build_session
    from icecompact_testing.oracle import read_table, rows_diff

    own_workdir = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="major-bench-")) if own_workdir else args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    catalog_cfg = CatalogConfig.sqlite(CATALOG_NAME, workdir / "catalog.db", workdir / "warehouse")
    spec = workload_spec(args)
    contenders = list(CORE_CONTENDERS) + ([] if args.no_diagnose else list(DIAG_CONTENDERS))
    print(f"major: {args.commits} rounds x {args.rows_per_commit} rows, {args.days} day partitions, "
          f"repeat {args.repeat}, workdir {workdir}", flush=True)
    load_start = os.getloadavg()
    t_start = time.perf_counter()
    spark = None
    try:
        print("build:", flush=True)
        t0 = time.perf_counter()
        spark = build_session([catalog_cfg], SparkSettings.from_environment(app_name="major-bench"))
        t_session = time.perf_counter() - t0
        print(f"  SparkSession {spark.sparkContext.master} {t_session:.1f} s", flush=True)
        base = build_or_reuse_base(spark, catalog_cfg, workdir, spec)
        base_table = f"{CATALOG_NAME}.{NAMESPACE}.{BASE}"
        table_info = table_summary(spark, base_table)
        print(f"  base table: {table_info}", flush=True)

        # The reference reader's rows of the base table are the expectation for every compacted copy.
        t0 = time.perf_counter()
        pyice = catalog_cfg.load().load_table(f"{NAMESPACE}.{BASE}")
        oracle_base = read_table(pyice)
        t_oracle = time.perf_counter() - t0
        if oracle_base.rows != base["model_rows"]:
            raise BenchmarkError("reference reader disagrees with the workload model on the base table:\n"
                                 + rows_diff(base["model_rows"], oracle_base.rows))
        expected = oracle_base.rows
        metadata_file = pyice.metadata_location
        print(f"  reference reader of the base table: {oracle_base.row_count} rows = workload model "
              f"({t_oracle:.1f} s)", flush=True)

        state = inspect_table(catalog_cfg, f"{NAMESPACE}.{BASE}")
        policy = CompactionPolicy.resolve(state.properties)
        base_plan = plan(state, policy, "major", _dt.datetime.now(_dt.timezone.utc))
        data_paths = sorted({f for g in base_plan.groups for t in g.tasks for f in t.data_files})
        delete_paths = sorted({f for g in base_plan.groups for t in g.tasks for f in t.delete_files})
        wanted = set(data_paths)
        data_bytes = sum(f.size_bytes for p in state.partitions for f in p.data_files if f.path in wanted)
        codec = parquet_codec(data_paths[0])
        plan_info = {"partitions_major": sum(1 for d in base_plan.decisions if d.kind.value == "major"),
                     "groups": len(base_plan.groups), "data_files": len(data_paths), "data_bytes": data_bytes,
                     "delete_files": len(delete_paths), "target_file_size_bytes": policy.target_file_size_bytes,
                     "parquet_codec": codec}
        print(f"  plan (mode major) of the base table: {plan_info}", flush=True)

        # Warm-up (JIT, OS cache of the shared input files) and the reference scan result.
        t_warm, reference_scan = full_scan(spark, base_table)
        if reference_scan[0] != oracle_base.row_count:
            raise BenchmarkError(f"Spark counts {reference_scan[0]} rows, the reference reader {oracle_base.row_count}")
        print(f"  warm-up scan {t_warm:.1f} s: {reference_scan}", flush=True)

        bench = MajorBench(spark, catalog_cfg, workdir, metadata_file, expected, reference_scan,
                      policy.target_file_size_bytes, data_paths, codec)

        warm: dict[str, float] = {}
        if not args.no_warmup:
            warm = bench.warm_up()
            print("  warm-up (untimed): " + ", ".join(f"{k} {v:.1f} s" for k, v in warm.items()), flush=True)

        samples: dict[str, list[float]] = defaultdict(list)
        details: dict[str, list[dict[str, Any]]] = defaultdict(list)
        loads: list[dict[str, Any]] = []
        for r in range(args.repeat):
            print(f"repeat {r + 1}/{args.repeat}:", flush=True)
            load_r0 = os.getloadavg()
            clones: dict[str, str] = {}
            for contender in rotated(contenders, r):
                elapsed, info, name = bench.run_contender(contender, r)
                samples[contender].append(elapsed)
                details[contender].append(info)
                if name is not None:
                    clones[contender] = name
                extra = ""
                if "after" in info:
                    a = info["after"]
                    extra = (f"; after: {a['data_files']} data / {a['delete_files']} delete files, "
                             f"{a['data_files_with_applicable_deletes']} data files with deletes; rows == base")
                print(f"  {contender:<22} {elapsed:7.2f} s  (rewrote {info.get('rewritten_data_files', info.get('input_files'))}"
                      f" files -> {info.get('added_data_files', info.get('output_files'))}{extra})", flush=True)
            scans = [("scan_before", BASE), ("scan_after_ours", clones["ours_count"]), ("scan_after_call", clones["call"])]
            for label, name in rotated(scans, r):  # type: ignore[arg-type]
                elapsed, result = bench.scan(name)
                if result != reference_scan:
                    raise BenchmarkError(f"{label}: scan of {name} returned {result}, expected {reference_scan}")
                samples[label].append(elapsed)
                print(f"  {label:<22} {elapsed:7.2f} s  (count, checksum == base)", flush=True)
            loads.append({"repeat": r + 1, "before": [round(x, 2) for x in load_r0],
                          "after": [round(x, 2) for x in os.getloadavg()]})
        load_end = os.getloadavg()

        times = {k: summary(v) for k, v in samples.items()}
        med = {k: v["median_s"] for k, v in times.items()}
        ratios = {
            "ours_count_over_call": med["ours_count"] / med["call"],
            "ours_checksum_over_call": med["ours_checksum"] / med["call"],
            "ours_none_over_call": med["ours_none"] / med["call"],
            "call_over_parquet": med["call"] / med["parquet"],
            "ours_count_over_parquet": med["ours_count"] / med["parquet"],
            "scan_before_over_after_ours": med["scan_before"] / med["scan_after_ours"],
            "scan_before_over_after_call": med["scan_before"] / med["scan_after_call"],
        }
        if "call_serial" in med:
            ratios["call_serial_over_call"] = med["call_serial"] / med["call"]
            ratios["action_per_partition_over_call"] = med["action_per_partition"] / med["call"]
            ratios["ours_none_over_action_per_partition"] = med["ours_none"] / med["action_per_partition"]
        goals = {
            "ours_count_overhead_le_1_15x": ratios["ours_count_over_call"] <= GOAL_OVERHEAD,
            "scan_after_ours_ge_5x_faster": ratios["scan_before_over_after_ours"] >= GOAL_SCAN_SPEEDUP,
        }
        instrumented = [c for c in OURS if c in details]
        phases = {c: median_phases([d["phases"] for d in details[c]]) for c in instrumented}
        # Per run, then the median of each line (medians of parts do not add up to the median of the whole).
        breakdown = {c: median_breakdown([breakdown_of(d["phases"], s_) for d, s_ in zip(details[c], samples[c])])
                     for c in instrumented}
        phases_per_run = {c: [{p: round(v["s"], 4) for p, v in d["phases"].items()} for d in details[c]]
                          for c in instrumented}
        # Everything that is identical across repeats, from the last one; per-repeat details kept too.
        work = {c: {k: v for k, v in details[c][-1].items() if k != "phases"} for c in contenders}

        import pyiceberg
        import pyspark

        result = {
            "benchmark": "major",
            "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join([".venv/bin/python", "bench/major.py", *(argv if argv is not None else sys.argv[1:])]),
            "config": {"commits": args.commits, "rows_per_commit": args.rows_per_commit, "days": args.days,
                       "repeat": args.repeat, "seed": args.seed, "contenders": contenders,
                       "workload_spec": base["spec"], "spark_master": spark.sparkContext.master},
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                        "pyiceberg": pyiceberg.__version__, "pyspark": pyspark.__version__,
                        "platform": platform.platform(),
                        "loadavg_1_5_15_start": [round(x, 2) for x in load_start],
                        "loadavg_1_5_15_end": [round(x, 2) for x in load_end], "loadavg_per_repeat": loads,
                        "note": "2-core machine shared with other people's Spark jobs: absolute times are noisy"},
            "method": {
                "same_data": "base table generated once; each contender compacts its own clone registered with "
                             "CALL system.register_table(metadata_file => base's current metadata file): identical "
                             "snapshots, sequence numbers, data and delete files (same paths, shared, never deleted)",
                "order": "contenders rotated every repeat; medians reported",
                "call_sql": bench.call_sql("<clone>"),
                "parquet": f"spark.read.parquet(<{len(data_paths)} data files ours rewrites>).write"
                           f".option('compression', '{codec}').parquet(tmp)",
                "scan": "spark.table(t).agg(count(1), sum(cast(xxhash64(all columns) as decimal(38,0))))",
                "ours": "inspect_table + plan(mode=major) + run_groups(level) of all groups at once, in-process",
            },
            "table": table_info,
            "plan": plan_info,
            "build_s": {"spark_session": round(t_session, 2), "generate": base["generate_s"],
                        "generate_reused_from_earlier_run": base["reused"], "oracle_read_base": round(t_oracle, 2),
                        "warm_up_scan": round(t_warm, 2), "warm_up_compactions": {k: round(v, 2) for k, v in warm.items()}},
            "workload_stats": base["stats"],
            "benchmark_wall_s": round(time.perf_counter() - t_start, 1),
            "times": times,
            "ratios": {k: round(v, 3) for k, v in ratios.items()},
            "goals": goals,
            "work": work,
            "phases": phases,
            "phases_per_run": phases_per_run,
            "breakdown": breakdown,
            "checks": {"rows_equal_reference_reader_of_base": sorted(c for c in contenders if c != "parquet"),
                       "scan_results_equal_base": ["scan_before", "scan_after_ours", "scan_after_call"],
                       "reference_rows": oracle_base.row_count, "reference_scan": list(reference_scan)},
        }
        text = render(result)
        print("\n" + text, flush=True)
        stem.with_suffix(".json").write_text(json.dumps(result, indent=2, default=str) + "\n")
        stem.with_suffix(".txt").write_text(text + "\n")
        print(f"\nwrote {stem.with_suffix('.json')} and {stem.with_suffix('.txt')}")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        if args.keep or not own_workdir:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def render(r: dict[str, Any]) -> str:
    t, ra, ti, pl, b = r["times"], r["ratios"], r["table"], r["plan"], r["build_s"]
    m = r["machine"]
    mb = 1024 * 1024
    lines = [
        f"major  {r['created_at']}  ({m['cpus']} cores shared, Spark {r['config']['spark_master']}; absolute times are "
        f"noisy)",
        f"table: CDC workload, {r['config']['commits']} rounds x {r['config']['rows_per_commit']} rows, format v2, "
        f"days(ts): {ti['partitions']} partitions, {ti['snapshots']} snapshots, {ti['data_files']} data files "
        f"({ti['data_bytes'] / mb:.1f} MB, {ti['data_records']} records), {ti['position_delete_files']} position "
        f"delete files ({ti['position_delete_records']} records), {ti['equality_delete_files']} equality delete files "
        f"({ti['equality_delete_records']} records); {r['checks']['reference_rows']} live rows",
        f"build (not part of any ratio): generator {b['generate']:.1f} s"
        + (" (reused from an earlier run)" if b["generate_reused_from_earlier_run"] else "")
        + f", SparkSession {b['spark_session']:.1f} s, reference reader of the base {b['oracle_read_base']:.1f} s; "
        f"whole benchmark {r['benchmark_wall_s'] / 60:.1f} min",
        "same data: the base table is generated once; every contender compacts its own clone registered from the "
        "base's metadata file (CALL system.register_table: identical snapshots, sequence numbers, data + delete files)",
        f"plan (mode major): {pl['partitions_major']} partitions in {pl['groups']} job group(s), {pl['data_files']} data "
        f"files ({pl['data_bytes'] / mb:.1f} MB) + {pl['delete_files']} delete files to rewrite; target "
        f"{pl['target_file_size_bytes'] // mb} MB (also passed to the CALL); Parquet codec {pl['parquet_codec']}",
        f"load average (1 min): {m['loadavg_1_5_15_start'][0]} at start, {m['loadavg_1_5_15_end'][0]} at end; per "
        "repeat " + ", ".join(f"{x['before'][0]}->{x['after'][0]}" for x in m["loadavg_per_repeat"]),
        f"median of {r['config']['repeat']} (min-max), contenders rotated each repeat:",
    ]
    labels = [
        ("ours_count", "ours MAJOR, validation count"),
        ("ours_checksum", "ours MAJOR, validation checksum"),
        ("ours_none", "ours MAJOR, validation none"),
        ("call", "CALL rewrite_data_files (whole table)"),
        ("call_serial", "  diag: CALL, max-concurrent-file-group-rewrites=1"),
        ("action_per_partition", "  diag: Iceberg action per partition (sequential)"),
        ("parquet", "plain Parquet read+write of the data files"),
        ("scan_before", "full scan before (base table)"),
        ("scan_after_ours", "full scan after ours (count)"),
        ("scan_after_call", "full scan after CALL"),
    ]
    for key, label in labels:
        if key in t:
            lines.append(timing_line(label, t[key], 52))
    lines.append("ratios (median / median):")
    for key, label in (
        ("ours_count_over_call", f"ours(count) / CALL            (goal <= {GOAL_OVERHEAD}x)"),
        ("ours_checksum_over_call", "ours(checksum) / CALL"),
        ("ours_none_over_call", "ours(none) / CALL"),
        ("call_over_parquet", "CALL / plain Parquet"),
        ("ours_count_over_parquet", "ours(count) / plain Parquet"),
        ("scan_before_over_after_ours", f"scan before / after ours      (goal >= {GOAL_SCAN_SPEEDUP}x)"),
        ("scan_before_over_after_call", "scan before / after CALL"),
        ("call_serial_over_call", "diag: CALL serial / CALL"),
        ("action_per_partition_over_call", "diag: action per partition / CALL"),
        ("ours_none_over_action_per_partition", "diag: ours(none) / action per partition"),
    ):
        if key in ra:
            lines.append(f"  {label:<52} {ra[key]:8.2f} x")
    g = r["goals"]
    lines.append(f"goals: ours(count) overhead <= {GOAL_OVERHEAD}x: {'MET' if g['ours_count_overhead_le_1_15x'] else 'NOT MET'} "
                 f"({ra['ours_count_over_call']:.2f}x); scan >= {GOAL_SCAN_SPEEDUP}x faster after ours: "
                 f"{'MET' if g['scan_after_ours_ge_5x_faster'] else 'NOT MET'} ({ra['scan_before_over_after_ours']:.1f}x)")
    lines.append(f"validation cost: count +{t['ours_count']['median_s'] - t['ours_none']['median_s']:.2f} s, checksum "
                 f"+{t['ours_checksum']['median_s'] - t['ours_none']['median_s']:.2f} s over ours(none)")
    bd = r["breakdown"]
    background = "background/group_base_rows_read (overlaps)"
    if background in bd.get("ours_count", {}):
        for c, level in (("ours_count", "count"), ("ours_checksum", "checksum")):
            slower = bd[c]["iceberg_rewrite_action"] - bd["ours_none"]["iceberg_rewrite_action"]
            lines.append(f"  {level}: {bd[c]['validation']:.2f} s validating in the job's thread; the group's base rows "
                         f"read in the background {bd[c][background]:.2f} s, overlapping Iceberg's rewrite action, "
                         f"which took {slower:+.2f} s longer than in ours(none) (on 2 shared cores they compete)")
    if "action_per_partition" in t:
        call = t["call"]["median_s"]
        lines.append(f"for scale: one Iceberg action per partition instead of one for the table "
                     f"+{t['action_per_partition']['median_s'] - call:.2f} s (CALL without concurrent file groups "
                     f"+{t['call_serial']['median_s'] - call:.2f} s); ours(none) over that "
                     f"{t['ours_none']['median_s'] - t['action_per_partition']['median_s']:+.2f} s (ours runs one "
                     f"action per job group: see the breakdown below)")
    lines.append("work done (last repeat): rewritten -> added data files, removed delete files; after: data / delete "
                 "files, data files with an applicable delete:")
    for c, w in r["work"].items():
        if c == "parquet":
            lines.append(f"  {c:<22} {w['input_files']} files -> {w['output_files']} files "
                         f"({w['output_bytes'] / mb:.1f} MB, {w['codec']})")
            continue
        a = w["after"]
        lines.append(f"  {c:<22} {w['rewritten_data_files']} -> {w['added_data_files']}, removed "
                     f"{w['removed_delete_files']}; after {a['data_files']} / {a['delete_files']} "
                     f"(dangling {a['dangling_delete_files']}), {a['data_files_with_applicable_deletes']} with deletes"
                     + (f"; {w['commits']} commits" if "commits" in w else ""))
    call_left = r["work"].get("call", {}).get("after", {}).get("dangling_delete_files", 0)
    if call_left:
        lines.append(f"  note: the CALL leaves {call_left} dangling delete files in metadata (position deletes committed at "
                     "the rewrite's starting sequence number, i.e. by the last DML, one per data file it touched; "
                     "Iceberg's dangling removal keeps seq == min data seq); ours' cleanup commit removes them")
    lines.append("where ours spends its time (median of per-run seconds; full call tree in the JSON 'phases'):")
    keys = list(r["breakdown"]["ours_count"])
    cols = list(r["breakdown"])
    lines.append("  " + f"{'':<48}" + "".join(f"{c.replace('ours_', ''):>14}" for c in cols))
    for k in keys:
        lines.append("  " + f"{k:<48}" + "".join(f"{r['breakdown'][c][k]:14.2f}" for c in cols))
    c = r["checks"]
    lines.append(f"check: reference-reader rows of every compacted copy == base table ({c['reference_rows']} rows): "
                 f"{', '.join(c['rows_equal_reference_reader_of_base'])}; every scan's (count, checksum) == base")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
