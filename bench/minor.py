"""MINOR compaction benchmark: equality-delete conversion versus MAJOR of the same partitions, and the full-table
scan time before, after MINOR and after MAJOR, measured side by side in one run on the same data.

The table: one CDC table built once with the seeded workload generator (``compaction.demo.workload``), format
v2 (``--format-version 3`` for DVs), ``days(ts)`` partitions, every delete and update done CDC style with equality
deletes committed through the Iceberg Java API (one equality-delete file per touched partition per round), so the
table carries >= 50 equality-delete files. Building it takes minutes and is not part of any ratio. Every contender
works on a **clone** registered from the base table's current metadata file (``register_table``): same snapshots,
sequence numbers and files (same paths); compactions only add files and metadata, so the base table stays as built.

Contenders (each on a fresh clone, order alternated every repeat, median of ``--repeat``; one untimed run of each
first, on throwaway clones, so JVM warm-up does not land on either):

* ``minor`` - ``inspect_table`` + ``plan(mode=minor)`` + ``run_group`` for every job group, validation ``count``;
* ``major`` - the same with ``mode=major``;
* ``minor (none)`` / ``major (none)`` - both again with validation ``none``: the validation's read of the base
  snapshot (every row with every delete applied) costs the same for both and weighs on their ratio;
* ``minor (partition granularity)`` - MINOR, validation ``count``, on a clone with Iceberg's
  ``write.delete.granularity=partition`` (v2 only): one position-delete file per partition instead of one per
  data file (Iceberg's default), which changes the scan after it.

Scans: ``SELECT count(*), sum(xxhash64(all columns))`` over the whole table (every column, deletes applied) on the
base table, on the MINOR clone and on the MAJOR clone, median of ``--repeat`` each, after one warm-up scan. A
diagnostic scan of a clone whose delete files were all removed (different content, so not checked) shows the floor
any MINOR can reach on these data files: MINOR keeps every data file, and on a table of many small files their
count, not the deletes, bounds the scan.

Correctness (the benchmark aborts otherwise): every scan returns the base table's (count, checksum); the reference
reader (``icecompact_testing.oracle.read_table``) of both compacted clones returns exactly the base table's rows,
which equal the generator's model; after MINOR no equality-delete file is left.

Usage::

    .venv/bin/python bench/minor.py            # 15 rounds x 6000 rows, 4 day partitions, repeat 3
    .venv/bin/python bench/minor.py --small    # quick smoke, results minor_small.*

Results: ``bench/results/minor.json`` + ``.txt`` (``minor_small.*`` for ``--small``). Absolute times drift on this
shared 2-core machine; the ratios are measured side by side in one run.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lib.common import RESULTS_DIR  # noqa: E402  (sets sys.path, SPARK_LOCAL_IP)

CATALOG_NAME = "bench"
NOW = _dt.datetime(2026, 1, 1, tzinfo=_dt.timezone.utc)
MINOR_GOAL = 0.5  # conversion time / MAJOR time
SCAN_GOAL = 3.0  # scan before / scan after MINOR


class BenchmarkError(RuntimeError):
    pass


def _spec(args: argparse.Namespace) -> Any:
    from compaction.demo.workload import WorkloadSpec

    return WorkloadSpec(seed=7, format_version=args.format_version, partitioning="days_ts", commits=args.rounds,
                        rows_per_commit=args.rows, days_span=args.days, delete_fraction=0.02, update_fraction=0.02,
                        reinsert_fraction=0.3, eq_delete_fraction=1.0, null_key_fraction=0.0,
                        use_equality_deletes=True, noise_eq_deletes=True)


def _clone(spark: Any, catalog: Any, base: str, name: str) -> str:
    table = catalog.load().load_table(tuple(base.split(".")))
    metadata = table.metadata_location
    spark.sql(f"CALL {CATALOG_NAME}.system.register_table(table => 'clones.{name}', metadata_file => '{metadata}')")
    return f"clones.{name}"


def _compact(spark: Any, catalog: Any, table: str, mode: Any, level: str = "count") -> tuple[float, list[Any]]:
    from compaction.core.planner import plan
    from compaction.core.policy import CompactionPolicy
    from compaction.metadata.inspect import inspect_table
    from compaction.spark.job import run_group
    from compaction.spark.validation import ValidationLevel

    started = time.perf_counter()
    state = inspect_table(catalog, table)
    compaction_plan = plan(state, CompactionPolicy.resolve(state.properties), mode, NOW)
    outcomes = [p for g in compaction_plan.groups
                for p in run_group(spark, compaction_plan, g.group_id, level=ValidationLevel(level)).partitions]
    elapsed = time.perf_counter() - started
    bad = [(p.label, p.status, p.error) for p in outcomes if p.status not in ("committed", "no_op")]
    if bad or not outcomes:
        raise BenchmarkError(f"{mode.value} on {table} did not commit every partition: {bad or 'nothing planned'}")
    return elapsed, outcomes


def _scan(spark: Any, table: str) -> tuple[float, tuple[int, str]]:
    from pyspark.sql import functions as F

    df = spark.table(f"{CATALOG_NAME}.{table}")
    row_hash = F.xxhash64(F.to_json(F.struct(*[F.col(c) for c in df.columns])))
    started = time.perf_counter()
    agg = df.agg(F.count(F.lit(1)).alias("n"), F.sum(row_hash.cast("decimal(38,0)")).alias("h")).collect()[0]
    return time.perf_counter() - started, (int(agg["n"]), str(agg["h"]))


def _drop_deletes(spark: Any, table: str) -> None:
    """Remove every delete file (one RowDelta): the scan floor of these data files, content no longer the same."""
    from compaction.spark import jvm as J
    from compaction.spark.partition_files import _iterate

    t = J.load_table(spark, f"{CATALOG_NAME}.{table}")
    delta = t.newRowDelta()
    for task in _iterate(t.newScan().planFiles()):
        for d in task.deletes():
            delta = delta.removeDeletes(d)
    delta.commit()


def _delete_files(catalog: Any, table: str) -> dict[str, int]:
    from icecompact_testing.oracle import read_table

    result = read_table(catalog.load().load_table(tuple(table.split("."))))
    out = {"data_files": len(result.data_files), "rows": result.row_count}
    for kind in ("equality", "position", "deletion_vector"):
        out[f"{kind}_delete_files"] = sum(1 for d in result.delete_files if d.delete_kind == kind)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="tiny data, quick smoke run")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--rows", type=int, default=6000, help="new rows per round")
    parser.add_argument("--days", type=int, default=4, help="day partitions")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--format-version", type=int, default=2, choices=(2, 3))
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--name", default=None, help="results file stem (default minor, or minor_small)")
    args = parser.parse_args(argv)
    if args.small:
        args.rounds, args.rows, args.repeat = 6, 800, 1
    from compaction.catalog import CatalogConfig
    from compaction.core.plan import CompactionMode
    from compaction.spark.session import SparkSettings, build_session, register_catalog
    from icecompact_testing.oracle import read_table
    from compaction.demo.workload import generate

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="icecompact-bench-minor-"))
    workdir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("ICECOMPACT_HOME", str(workdir / "home"))
    catalog = CatalogConfig.sqlite(CATALOG_NAME, workdir / "catalog.db", workdir / "warehouse")
    spark = build_session([], SparkSettings(master="local[2]", app_name="bench-minor"))
    register_catalog(spark, catalog)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG_NAME}.clones")
    try:
        spec = _spec(args)
        print(f"building the CDC table ({spec.commits} rounds x {spec.rows_per_commit} rows, v{spec.format_version})...",
              flush=True)
        started = time.perf_counter()
        workload = generate(spark, catalog, "cdc.base", spec)
        build_s = time.perf_counter() - started
        base_oracle = read_table(catalog.load().load_table(workload.identifier))
        if base_oracle.rows != workload.expected_rows:
            raise BenchmarkError("oracle and generator model disagree on the base table")
        base_files = _delete_files(catalog, "cdc.base")
        print(f"  built in {build_s:.0f} s: {base_files}", flush=True)
        if base_files["equality_delete_files"] < 50 and not args.small:
            raise BenchmarkError(f"only {base_files['equality_delete_files']} equality-delete files (< 50)")

        # Warm-up: one untimed run of each contender and one scan.
        for mode in (CompactionMode.MINOR, CompactionMode.MAJOR):
            _compact(spark, catalog, _clone(spark, catalog, "cdc.base", f"warm_{mode.value}"), mode)
        _, reference = _scan(spark, "cdc.base")

        contenders = [("minor", CompactionMode.MINOR, "count"), ("major", CompactionMode.MAJOR, "count"),
                      ("minor_none", CompactionMode.MINOR, "none"), ("major_none", CompactionMode.MAJOR, "none")]
        if args.format_version == 2:
            contenders.append(("minor_partition", CompactionMode.MINOR, "count"))
        times: dict[str, list[float]] = {label: [] for label, _, _ in contenders}
        clones: dict[str, str] = {}
        outcomes: dict[str, list[Any]] = {}
        for r in range(args.repeat):
            order = contenders if r % 2 == 0 else list(reversed(contenders))
            for label, mode, level in order:
                name = _clone(spark, catalog, "cdc.base", f"{label}_{r}")
                if label == "minor_partition":  # Iceberg's table property, before the timed part
                    spark.sql(f"ALTER TABLE {CATALOG_NAME}.{name} SET TBLPROPERTIES "
                              "('write.delete.granularity'='partition')")
                elapsed, result = _compact(spark, catalog, name, mode, level)
                times[label].append(elapsed)
                clones[label], outcomes[label] = name, result
                print(f"  repeat {r}: {label} {elapsed:.1f} s ({len(result)} partitions)", flush=True)
        floor = _clone(spark, catalog, "cdc.base", "no_deletes")
        _drop_deletes(spark, floor)
        _scan(spark, floor)  # warm-up

        scanned = [("before", "cdc.base"), ("after_minor", clones["minor"]), ("after_major", clones["major"]),
                   ("no_deletes", floor)]
        if "minor_partition" in clones:
            scanned.append(("after_minor_partition", clones["minor_partition"]))
        scans: dict[str, list[float]] = {label: [] for label, _ in scanned}
        for r in range(args.repeat):
            for label, table in scanned:
                elapsed, fingerprint = _scan(spark, table)
                if label != "no_deletes" and fingerprint != reference:
                    raise BenchmarkError(f"scan of {table} returned {fingerprint}, base table {reference}")
                scans[label].append(elapsed)

        after = {}
        for label in [c for c in ("minor", "major", "minor_partition") if c in clones]:
            oracle = read_table(catalog.load().load_table(tuple(clones[label].split("."))))
            if oracle.rows != base_oracle.rows:
                raise BenchmarkError(f"rows changed by {label}")
            after[label] = _delete_files(catalog, clones[label])
        if after["minor"]["equality_delete_files"]:
            raise BenchmarkError(f"MINOR left equality deletes: {after['minor']}")

        med = {k: statistics.median(v) for k, v in times.items()}
        scan_med = {k: statistics.median(v) for k, v in scans.items()}
        converted = sum(p.converted_rows for p in outcomes["minor"])
        result = {
            "benchmark": "minor",
            "small": args.small,
            "when": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "machine": {"cpus": os.cpu_count(), "load_average": os.getloadavg(), "python": platform.python_version()},
            "workload": {"spec": repr(spec), "build_seconds": round(build_s, 1), "base": base_files},
            "after": after,
            "converted_rows": converted,
            "compaction_seconds": {k: [round(x, 2) for x in v] for k, v in times.items()},
            "compaction_median_seconds": {k: round(v, 2) for k, v in med.items()},
            "minor_over_major": round(med["minor"] / med["major"], 3),
            "minor_over_major_validation_none": round(med["minor_none"] / med["major_none"], 3),
            "minor_goal": MINOR_GOAL,
            "scan_seconds": {k: [round(x, 3) for x in v] for k, v in scans.items()},
            "scan_median_seconds": {k: round(v, 3) for k, v in scan_med.items()},
            "scan_speedup_after_minor": round(scan_med["before"] / scan_med["after_minor"], 2),
            "scan_speedup_after_major": round(scan_med["before"] / scan_med["after_major"], 2),
            "scan_speedup_no_deletes": round(scan_med["before"] / scan_med["no_deletes"], 2),
            "scan_speedup_after_minor_partition": (round(scan_med["before"] / scan_med["after_minor_partition"], 2)
                                                   if "after_minor_partition" in scan_med else None),
            "minor_partition_over_major": (round(med["minor_partition"] / med["major"], 3)
                                           if "minor_partition" in med else None),
            "scan_goal": SCAN_GOAL,
        }
        result["minor_goal_met"] = result["minor_over_major"] <= MINOR_GOAL
        result["scan_goal_met"] = result["scan_speedup_after_minor"] >= SCAN_GOAL
        text = render(result)
        print(text)
        RESULTS_DIR.mkdir(exist_ok=True)
        stem = args.name or ("minor_small" if args.small else "minor")
        (RESULTS_DIR / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
        (RESULTS_DIR / f"{stem}.txt").write_text(text + "\n")
        return 0
    finally:
        spark.stop()
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


def render(r: dict[str, Any]) -> str:
    med, scan = r["compaction_median_seconds"], r["scan_median_seconds"]
    lines = [
        f"MINOR benchmark ({'small' if r['small'] else 'full'}), {r['when']}, load average {r['machine']['load_average']}",
        f"table: {r['workload']['base']}",
        f"after MINOR: {r['after']['minor']}",
        f"after MAJOR: {r['after']['major']}",
        f"converted rows (equality -> position): {r['converted_rows']}",
        "",
        f"MINOR {med['minor']:.1f} s vs MAJOR {med['major']:.1f} s, validation count (median of "
        f"{len(r['compaction_seconds']['minor'])}): ratio {r['minor_over_major']:.2f} (goal <= {r['minor_goal']}: "
        f"{'MET' if r['minor_goal_met'] else 'NOT MET'})",
        f"MINOR {med['minor_none']:.1f} s vs MAJOR {med['major_none']:.1f} s, validation none: ratio "
        f"{r['minor_over_major_validation_none']:.2f}",
        f"full scan: before {scan['before']:.2f} s, after MINOR {scan['after_minor']:.2f} s "
        f"({r['scan_speedup_after_minor']:.1f}x faster; goal >= {r['scan_goal']}x: "
        f"{'MET' if r['scan_goal_met'] else 'NOT MET'}), after MAJOR {scan['after_major']:.2f} s "
        f"({r['scan_speedup_after_major']:.1f}x faster)",
        *([f"MINOR with write.delete.granularity=partition (one position-delete file per partition): "
           f"{med['minor_partition']:.1f} s, {r['minor_partition_over_major']:.2f}x MAJOR (validation count); scan "
           f"after it {scan['after_minor_partition']:.2f} s ({r['scan_speedup_after_minor_partition']:.1f}x faster "
           f"than before; goal >= {r['scan_goal']}x: "
           f"{'MET' if r['scan_speedup_after_minor_partition'] >= r['scan_goal'] else 'NOT MET'})",
           f"after MINOR (partition granularity): {r['after']['minor_partition']}"]
          if r.get("minor_partition_over_major") is not None else []),
        f"diagnostic: same data files with every delete removed {scan['no_deletes']:.2f} s "
        f"({r['scan_speedup_no_deletes']:.1f}x faster than before: the most any MINOR can give on this table)",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
