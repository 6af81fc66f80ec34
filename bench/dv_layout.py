"""Deletion-vector layout: all DVs of a partition's MINOR commit in one Puffin file (Iceberg's ``BaseDVFileWriter``
layout, our default) versus one Puffin file per DV (``compaction.one-dv-per-puffin-file=true``), measured side by
side in one run on the same v3 tables.

Why: DuckDB 1.5.5 with its external file cache on (its default) can apply the wrong DV when a Puffin file holds
several DVs (``icecompact_testing.engines``): a DuckDB user with default settings may read wrong rows after our v3
MINOR. This measures whether one DV per Puffin file avoids that, and what it costs.

Per shape (a v3 bulk table, ``icecompact_testing.bulk``, built once): ``--repeat`` pairs of clones registered from
the base's metadata file (``CALL system.register_table``: the same snapshots and files), one clone per layout with the
table property set (``false`` / ``true``, so both get the same metadata commit), our MINOR in-process on each
(``inspect_table`` + ``plan`` + ``run_group``, mode ``minor``, validation ``none``; which layout goes first alternates
from pair to pair). Then per clone:

* files after MINOR, from the ``delete_files`` metadata table: DVs, Puffin files, Puffin files holding several DVs,
  Puffin bytes on storage;
* the reference: Spark's read written to Parquet (untimed) and fingerprinted in DuckDB (cache off): ``count(*)``,
  ``sum`` and ``bit_xor`` of ``hash(every column)``, every column cast to the table's type;
* ``duckdb``: ``SELECT * FROM iceberg_scan('<metadata file>')`` into Arrow with DuckDB's default settings, ``--reads``
  times, each on a fresh in-memory database (a fresh external file cache); each read fingerprinted and judged:
  correct, or wrong with the rows missing and extra (``EXCEPT ALL`` both ways);
* ``duckdb_nocache``: the same with ``SET enable_external_file_cache = false`` (the control);
* ``spark``: ``count(*)`` + ``sum(xxhash64(every column))`` in the JVM, ``--reads`` times.

MINOR time: the wall clock of inspect + plan + run (median over the pairs), and of its DV writing alone
(``compaction.spark.minor.write_deletion_vectors``, wrapped by a timer). Scan times: median over every read of every
clone of the layout. Ratios are per-file / shared, measured in this run.

Shapes: ``xs`` (the bulk table of ``tests/test_engines.py``, seed 17), ``s`` (``bench/interop.py``'s, seed
20261123), ``s_many`` (``s`` with a 1 MiB target file size: ~90 segment files, ~40 DVs per Puffin file after a
default MINOR).

Usage::

    .venv/bin/python bench/dv_layout.py                        # every shape; 3 pairs; 5 reads per clone
    .venv/bin/python bench/dv_layout.py --shapes s --repeat 2 --reads 3

Results: ``bench/results/dv_layout.{txt,json}`` (written after every shape).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import functools
import gc
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from lib.common import RESULTS_DIR  # noqa: E402  (sets sys.path, SPARK_LOCAL_IP)
from lib.contenders import register_clone  # noqa: E402

CATALOG_NAME = "dvlayout"
NAMESPACE = "ns"
NOW = _dt.datetime(2026, 1, 1, tzinfo=_dt.timezone.utc)
MIB = 1024 * 1024
PROPERTY = "compaction.one-dv-per-puffin-file"
LAYOUTS = ("shared", "per_file")  # property false / true
SHAPES: dict[str, tuple[str, dict[str, Any]]] = {
    "xs": ("xs", {"seed": 17}),
    "s": ("s", {"seed": 20261123}),
    "s_many": ("s", {"seed": 20261123, "target_file_size": 1 * MIB}),
}
CORRECT, WRONG, ERROR = "correct", "wrong", "error"
NOTES = [
    "shared = all DVs of a partition's MINOR commit in one Puffin file (Iceberg's BaseDVFileWriter layout, the "
    "default); per_file = compaction.one-dv-per-puffin-file=true, one Puffin file per DV",
    "DVs / Puffin files / shared = Puffin files holding several DVs / same-size = holding two DVs of the same byte "
    "length / max DVs in one Puffin file, after our MINOR (delete_files metadata table; the generator's own DVs that "
    "MINOR did not rewrite included)",
    "MINOR = inspect + plan + run of our MINOR in process (validation none), median over the pairs; DV write = the "
    "part of it spent in write_deletion_vectors",
    "duckdb = DuckDB's default settings (external file cache on), a fresh in-memory database per read; nocache = "
    "SET enable_external_file_cache = false; k/n = reads that returned exactly Spark's rows (count + sum and xor of a "
    "row hash over every column); wrong reads show -missing/+extra rows of the first one",
    "scan times: duckdb = every row of every column into Arrow in this Python process; spark = count(*) + "
    "sum(xxhash64(all columns)) in the JVM (local[2]); median over all reads of the layout's clones",
]


class BenchmarkError(RuntimeError):
    pass


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Fingerprints:
    """Order-independent fingerprints of row sets in one DuckDB connection (external file cache off), every
    column cast to the table's DuckDB type as ``iceberg_scan`` reports it, so any source hashes alike."""

    def __init__(self, metadata_file: str) -> None:
        from icecompact_testing import engines as E

        self.con = E.duckdb_connect(external_file_cache=False)
        described = self.con.execute(f"DESCRIBE SELECT * FROM {E.duckdb_scan_sql(metadata_file)}").fetchall()
        columns = [(r[0], r[1]) for r in described]
        self.row_hash = "hash(" + ", ".join(f"CAST({_quote(n)} AS {t})" for n, t in columns) + ")"
        self.select = ", ".join(f"CAST({_quote(n)} AS {t}) AS {_quote(n)}" for n, t in columns)

    def of(self, relation: str) -> tuple[int, int, int]:
        n, total, xor = self.con.execute(
            f"SELECT count(*), coalesce(sum({self.row_hash}::HUGEINT), 0), coalesce(bit_xor({self.row_hash}), 0) "
            f"FROM {relation}").fetchone()
        return int(n), int(total), int(xor)

    def diff(self, expected: str, actual: str) -> tuple[int, int]:
        def count(a: str, b: str) -> int:
            return int(self.con.execute(f"SELECT count(*) FROM (SELECT {self.select} FROM {a} EXCEPT ALL "
                                        f"SELECT {self.select} FROM {b})").fetchone()[0])
        return count(expected, actual), count(actual, expected)

    def close(self) -> None:
        self.con.close()


def spark_scan(spark: Any, table: str) -> tuple[float, tuple[int, str]]:
    """count(*) and an order-independent checksum over every column (reads every column, applies every delete)."""
    from pyspark.sql import functions as F

    t0 = time.perf_counter()
    df = spark.table(table)
    row = df.agg(F.count(F.lit(1)).alias("n"),
                 F.sum(F.xxhash64(*[F.col(c) for c in df.columns]).cast("decimal(38,0)")).alias("h")).collect()[0]
    return time.perf_counter() - t0, (int(row["n"]), str(row["h"]))


class DVWriteTimer:
    """Seconds spent in ``compaction.spark.minor.write_deletion_vectors`` (what commit_changes calls), by wrapping it
    while the benchmark runs."""

    def __init__(self) -> None:
        import compaction.spark.minor as minor

        self.module, self.original = minor, minor.write_deletion_vectors
        self.seconds = 0.0

        @functools.wraps(self.original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return self.original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0

        minor.write_deletion_vectors = timed

    def restore(self) -> None:
        self.module.write_deletion_vectors = self.original


class ShapeRun:
    def __init__(self, spark: Any, catalog_cfg: Any, workdir: Path, shape: str, repeat: int, reads: int,
                 log: Callable[[str], None]) -> None:
        self.spark, self.catalog_cfg, self.workdir = spark, catalog_cfg, workdir
        self.shape, self.repeat, self.reads = shape, repeat, reads
        self.log = lambda m: log(f"[{shape}] {m}")
        self.timer = DVWriteTimer()

    def ref(self, name: str) -> str:
        return f"{CATALOG_NAME}.{NAMESPACE}.{name}"

    def compact_minor(self, name: str) -> dict[str, Any]:
        from compaction.core.planner import plan
        from compaction.core.policy import CompactionPolicy
        from compaction.metadata.inspect import inspect_table
        from compaction.spark.job import run_group
        from compaction.spark.validation import ValidationLevel

        self.timer.seconds = 0.0
        t0 = time.perf_counter()
        state = inspect_table(self.catalog_cfg, f"{NAMESPACE}.{name}")
        policy = CompactionPolicy.resolve(state.properties)
        the_plan = plan(state, policy, "minor", NOW)
        parts = []
        for group in the_plan.groups:
            parts += run_group(self.spark, the_plan, group.group_id, level=ValidationLevel.parse("none"),
                               max_retries=3).partitions
        seconds = time.perf_counter() - t0
        bad = [f"{p.label}: {p.status} {p.error or ''}" for p in parts if p.status not in ("committed", "no_op")]
        if bad or not parts or the_plan.deferred:
            raise BenchmarkError(f"MINOR on {name}: {bad[:5] or 'nothing planned'}; deferred {len(the_plan.deferred)}")
        return {"seconds": round(seconds, 3), "dv_write_seconds": round(self.timer.seconds, 3),
                "partitions": len(parts), "groups": len(the_plan.groups),
                "one_dv_per_puffin_file": policy.one_dv_per_puffin_file}

    def delete_files(self, name: str) -> dict[str, Any]:
        """The live delete files: DVs per Puffin file, and Puffin files holding two DVs of the same byte length (the
        case where a blob returned for another one still passes DuckDB's length and checksum checks)."""
        try:
            rows = self.spark.sql(f"SELECT file_path, file_format, file_size_in_bytes, content_size_in_bytes "
                                  f"FROM {self.ref(name)}.delete_files").collect()
        except Exception:  # noqa: BLE001 - a runtime whose metadata table lacks the v3 columns
            rows = self.spark.sql(f"SELECT file_path, file_format, file_size_in_bytes, NULL AS content_size_in_bytes "
                                  f"FROM {self.ref(name)}.delete_files").collect()
        puffin: dict[str, list[Any]] = {}
        sizes: dict[str, int] = {}
        other = 0
        for r in rows:
            if r["file_format"] == "PUFFIN":
                puffin.setdefault(r["file_path"], []).append(r["content_size_in_bytes"])
                sizes[r["file_path"]] = int(r["file_size_in_bytes"])
            else:
                other += 1
        return {"dvs": sum(len(v) for v in puffin.values()), "puffin_files": len(puffin),
                "puffin_files_with_several_dvs": sum(1 for v in puffin.values() if len(v) > 1),
                "puffin_files_with_same_size_dvs": sum(1 for v in puffin.values()
                                                       if None not in v and len(set(v)) < len(v)),
                "max_dvs_per_puffin_file": max((len(v) for v in puffin.values()), default=0),
                "puffin_bytes": sum(sizes.values()), "other_delete_files": other}

    def reference(self, name: str, fp: Fingerprints) -> tuple[str, tuple[int, int, int]]:
        out = self.workdir / f"spark_{name}"
        shutil.rmtree(out, ignore_errors=True)
        self.spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        self.spark.table(self.ref(name)).write.parquet(str(out))
        relation = f"read_parquet('{out}/*.parquet')"
        return relation, fp.of(relation)

    def duckdb_read(self, name: str, *, cache: bool, fp: Fingerprints, ref_relation: str,
                    ref_fp: tuple[int, int, int]) -> dict[str, Any]:
        from icecompact_testing import engines as E

        table = self.catalog_cfg.load().load_table(f"{NAMESPACE}.{name}")
        gc.collect()
        con = E.duckdb_connect(external_file_cache=cache)
        try:
            t0 = time.perf_counter()
            arrow = con.execute(f"SELECT * FROM {E.duckdb_scan_sql(table.metadata_location)}").to_arrow_table()
            seconds = time.perf_counter() - t0
        except Exception as exc:  # noqa: BLE001 - recorded with DuckDB's message
            return {"outcome": ERROR, "message": f"{type(exc).__name__}: {exc}"[:300]}
        finally:
            con.close()
        fp.con.register("engine_rows", arrow)
        try:
            got = fp.of("engine_rows")
            info: dict[str, Any] = {"outcome": CORRECT if got == ref_fp else WRONG, "seconds": round(seconds, 4),
                                    "rows": got[0]}
            if got != ref_fp:
                missing, extra = fp.diff(ref_relation, "engine_rows")
                info.update({"missing_rows": missing, "extra_rows": extra})
            return info
        finally:
            fp.con.unregister("engine_rows")
            del arrow

    def judge(self, name: str, fp: Fingerprints, spark_base: tuple[int, str]) -> dict[str, Any]:
        ref_relation, ref_fp = self.reference(name, fp)
        out: dict[str, Any] = {"table": name, "files": self.delete_files(name), "reference_rows": ref_fp[0]}
        spark = [spark_scan(self.spark, self.ref(name)) for _ in range(self.reads)]
        out["spark"] = {"seconds": [round(s, 4) for s, _ in spark],
                        "correct": all(f == spark_base for _, f in spark)}
        for engine, cache in (("duckdb", True), ("duckdb_nocache", False)):
            out[engine] = [self.duckdb_read(name, cache=cache, fp=fp, ref_relation=ref_relation, ref_fp=ref_fp)
                           for _ in range(self.reads)]
        shutil.rmtree(self.workdir / f"spark_{name}", ignore_errors=True)
        return out

    def run(self) -> dict[str, Any]:
        from icecompact_testing.bulk import BulkSpec, generate_bulk

        size, overrides = SHAPES[self.shape]
        base = f"base_{self.shape}"
        self.log(f"generating {size} v3 {overrides} ...")
        t0 = time.perf_counter()
        built = generate_bulk(self.spark, self.catalog_cfg, f"{NAMESPACE}.{base}",
                              BulkSpec.named(size, 3, **overrides), replace=True)
        live_rows, stats = built.live_rows, dict(built.stats)
        build_s = time.perf_counter() - t0
        metadata_file = self.catalog_cfg.load().load_table(f"{NAMESPACE}.{base}").metadata_location
        _, spark_base = spark_scan(self.spark, self.ref(base))  # also warms the OS cache
        if spark_base[0] != live_rows:
            raise BenchmarkError(f"Spark counts {spark_base[0]} rows, the generator's model {live_rows}")
        before_files = self.delete_files(base)
        clones: dict[str, list[str]] = {layout: [] for layout in LAYOUTS}
        minors: dict[str, list[dict[str, Any]]] = {layout: [] for layout in LAYOUTS}
        fp = Fingerprints(metadata_file)
        judged: dict[str, list[dict[str, Any]]] = {layout: [] for layout in LAYOUTS}
        try:
            for pair in range(self.repeat):
                order = LAYOUTS if pair % 2 == 0 else tuple(reversed(LAYOUTS))
                for layout in order:
                    name = f"{layout}_{self.shape}_{pair}"
                    register_clone(self.spark, CATALOG_NAME, NAMESPACE, name, metadata_file)
                    value = "true" if layout == "per_file" else "false"
                    self.spark.sql(f"ALTER TABLE {self.ref(name)} SET TBLPROPERTIES ('{PROPERTY}' = '{value}')")
                    minor = self.compact_minor(name)
                    if minor["one_dv_per_puffin_file"] != (layout == "per_file"):
                        raise BenchmarkError(f"{name}: the policy did not take {PROPERTY}={value}")
                    minors[layout].append(minor)
                    clones[layout].append(name)
                    self.log(f"pair {pair} {layout:<9} MINOR {minor['seconds']:6.2f} s "
                             f"(DV write {minor['dv_write_seconds']:.2f} s)")
            for layout in LAYOUTS:
                for name in clones[layout]:
                    result = self.judge(name, fp, spark_base)
                    judged[layout].append(result)
                    ok = sum(r["outcome"] == CORRECT for r in result["duckdb"])
                    ok_nc = sum(r["outcome"] == CORRECT for r in result["duckdb_nocache"])
                    self.log(f"{name}: {result['files']['dvs']} DVs in {result['files']['puffin_files']} Puffin "
                             f"files; duckdb {ok}/{self.reads} correct, nocache {ok_nc}/{self.reads}")
        finally:
            fp.close()
            for layout in LAYOUTS:
                for name in clones[layout]:
                    self.spark.sql(f"DROP TABLE IF EXISTS {self.ref(name)}")
            self.spark.sql(f"DROP TABLE IF EXISTS {self.ref(base)}")
        return {"shape": self.shape, "size": size, "overrides": overrides, "build_s": round(build_s, 1),
                "live_rows": live_rows, "stats": stats, "files_before": before_files,
                "layouts": {layout: summarize(minors[layout], judged[layout]) for layout in LAYOUTS}}


def summarize(minors: list[dict[str, Any]], judged: list[dict[str, Any]]) -> dict[str, Any]:
    def med(values: list[float]) -> float | None:
        return round(statistics.median(values), 4) if values else None

    duck = [r for j in judged for r in j["duckdb"]]
    nocache = [r for j in judged for r in j["duckdb_nocache"]]
    wrong = [r for r in duck if r["outcome"] == WRONG]
    return {
        "minor_s": med([m["seconds"] for m in minors]), "minor_samples_s": [m["seconds"] for m in minors],
        "dv_write_s": med([m["dv_write_seconds"] for m in minors]),
        "dv_write_samples_s": [m["dv_write_seconds"] for m in minors],
        "files": judged[0]["files"] if judged else {},
        "files_per_clone": [j["files"] for j in judged],
        "duckdb_reads": len(duck), "duckdb_correct": sum(r["outcome"] == CORRECT for r in duck),
        "duckdb_wrong": len(wrong), "duckdb_errors": sum(r["outcome"] == ERROR for r in duck),
        "duckdb_first_wrong": wrong[0] if wrong else None,
        "clones_with_a_wrong_duckdb_read": sum(any(r["outcome"] == WRONG for r in j["duckdb"]) for j in judged),
        "nocache_reads": len(nocache), "nocache_correct": sum(r["outcome"] == CORRECT for r in nocache),
        "duckdb_s": med([r["seconds"] for r in duck if "seconds" in r]),
        "nocache_s": med([r["seconds"] for r in nocache if "seconds" in r]),
        "spark_s": med([s for j in judged for s in j["spark"]["seconds"]]),
        "spark_correct": all(j["spark"]["correct"] for j in judged),
        "clones": judged,
    }


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "n/a"


def render(r: dict[str, Any]) -> str:
    lines = [f"dv_layout  {r['created_at']}  ({r['machine']['cpus']} cores shared, Spark {r['config']['spark_master']}; "
             f"duckdb {r['machine']['duckdb']} + iceberg extension from PyPI; {r['config']['repeat']} clone pairs, "
             f"{r['config']['reads']} reads per clone and engine; load average {r['machine']['loadavg_start'][0]} at "
             f"start, {r['machine']['loadavg_end'][0]} at end)",
             "our MINOR on clones of one v3 bulk table per shape, one clone per DV layout; every read judged against "
             "Spark's read of the same snapshot"]
    for run in r["runs"]:
        if "error" in run:
            lines += ["", f"== {run['shape']}: FAILED: {run['error'][:300]}"]
            continue
        fb = run["files_before"]
        lines += ["", f"== {run['shape']} (bulk {run['size']} v3 {run['overrides']}): {run['live_rows']:,} live rows; "
                      f"before MINOR {fb['dvs']} DVs in {fb['puffin_files']} Puffin files + "
                      f"{fb['other_delete_files']} equality-delete files",
                  f"   {'layout':<9} {'DVs':>5} {'Puffin':>7} {'shared':>7} {'same-size':>9} {'max/file':>8} "
                  f"{'Puffin KiB':>10}   "
                  f"{'MINOR s':>8} {'DV write s':>10}   {'duckdb correct':<16} {'nocache':<9} {'duckdb s':>8} "
                  f"{'nocache s':>9} {'spark s':>8}"]
        for layout in LAYOUTS:
            x = run["layouts"][layout]
            f = x["files"]
            duck = f"{x['duckdb_correct']}/{x['duckdb_reads']}"
            first = x["duckdb_first_wrong"]
            if first:
                duck += f" (-{first.get('missing_rows')}/+{first.get('extra_rows')})"
            lines.append(f"   {layout:<9} {f.get('dvs', 0):>5} {f.get('puffin_files', 0):>7} "
                         f"{f.get('puffin_files_with_several_dvs', 0):>7} "
                         f"{f.get('puffin_files_with_same_size_dvs', 0):>9} {f.get('max_dvs_per_puffin_file', 0):>8} "
                         f"{f.get('puffin_bytes', 0) / 1024:>10.1f}   {x['minor_s']:>8.2f} {x['dv_write_s']:>10.3f}   "
                         f"{duck:<16} {str(x['nocache_correct']) + '/' + str(x['nocache_reads']):<9} "
                         f"{x['duckdb_s']:>8.3f} {x['nocache_s']:>9.3f} {x['spark_s']:>8.3f}")
        s, p = run["layouts"]["shared"], run["layouts"]["per_file"]
        lines.append(f"   per_file / shared: Puffin files {_ratio(p['files'].get('puffin_files'), s['files'].get('puffin_files'))}, "
                     f"Puffin bytes {_ratio(p['files'].get('puffin_bytes'), s['files'].get('puffin_bytes'))}, "
                     f"MINOR {_ratio(p['minor_s'], s['minor_s'])}, DV write {_ratio(p['dv_write_s'], s['dv_write_s'])}, "
                     f"duckdb scan {_ratio(p['duckdb_s'], s['duckdb_s'])}, nocache scan "
                     f"{_ratio(p['nocache_s'], s['nocache_s'])}, spark scan {_ratio(p['spark_s'], s['spark_s'])}")
    if not r.get("complete", True):
        lines[0] += "  [INCOMPLETE]"
    lines += ["", "notes:"] + [f"   {n}" for n in r["notes"]]
    return "\n".join(lines)


def write_results(args: argparse.Namespace, argv: list[str] | None, spark: Any, runs: list[dict[str, Any]],
                  shapes: list[str], load_start: tuple[float, float, float], t_start: float) -> str:
    import duckdb

    result = {
        "benchmark": "dv_layout",
        "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([".venv/bin/python", "bench/dv_layout.py", *(argv if argv is not None else sys.argv[1:])]),
        "config": {"shapes": shapes, "repeat": args.repeat, "reads": args.reads,
                   "spark_master": spark.sparkContext.master},
        "complete": len(runs) == len(shapes),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "duckdb": duckdb.__version__,
                    "loadavg_start": [round(x, 2) for x in load_start],
                    "loadavg_end": [round(x, 2) for x in os.getloadavg()]},
        "wall_s": round(time.perf_counter() - t_start, 1),
        "runs": runs,
        "notes": NOTES,
    }
    text = render(result)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.with_suffix(".json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    args.output.with_suffix(".txt").write_text(text + "\n")
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated shapes of {list(SHAPES)}")
    ap.add_argument("--repeat", type=int, default=3, help="clone pairs (one MINOR per layout each; default 3)")
    ap.add_argument("--reads", type=int, default=5, help="reads per clone and engine (default 5)")
    ap.add_argument("--output", type=Path, default=RESULTS_DIR / "dv_layout", help="result stem")
    args = ap.parse_args(argv)
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    if not shapes or any(s not in SHAPES for s in shapes) or args.repeat < 1 or args.reads < 1:
        ap.error(f"--shapes must name shapes of {list(SHAPES)}; --repeat and --reads >= 1")

    from compaction.catalog import CatalogConfig
    from compaction.spark.session import SparkSettings, build_session

    workdir = Path(tempfile.mkdtemp(prefix="dv-layout-bench-"))
    catalog_cfg = CatalogConfig.sqlite(CATALOG_NAME, workdir / "catalog.db", workdir / "warehouse")
    t_start = time.perf_counter()
    load_start = os.getloadavg()
    spark = build_session([catalog_cfg], SparkSettings.from_environment(app_name="dv-layout-bench"))
    runs: list[dict[str, Any]] = []
    text = ""
    try:
        for shape in shapes:
            run = ShapeRun(spark, catalog_cfg, workdir, shape, args.repeat, args.reads,
                           lambda m: print(m, flush=True))
            try:
                runs.append(run.run())
            except Exception as exc:  # noqa: BLE001 - one shape failing keeps the others' figures
                runs.append({"shape": shape, "error": f"{type(exc).__name__}: {exc}"})
                print(f"[{shape}] FAILED: {exc}", flush=True)
            finally:
                run.timer.restore()
            text = write_results(args, argv, spark, runs, shapes, load_start, t_start)
        print("\n" + text, flush=True)
        print(f"wrote {args.output}.{{txt,json}}")
        return 0 if all("error" not in r for r in runs) else 1
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
