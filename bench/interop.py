"""What other engines see, at production shape: DuckDB and pyiceberg against Spark, before compaction, after our
MINOR and after our MAJOR, on the bulk generator's streaming CDC tables (``icecompact_testing.bulk``, sizes ``s`` and
``m``; format v2 position-delete files and/or v3 deletion vectors).

Per size and format version the base table is built once; our MINOR and our MAJOR each run on their own clone
registered from the base's metadata file (``CALL system.register_table``: the same snapshots, sequence numbers and
files), in-process (``inspect_table`` + ``plan`` + ``run_group`` of every job group, validation ``none``: the
engines are the check here). Then, for each state (``before`` = the base, ``after_minor``, ``after_major``):

* the reference: Spark's read of the state written to Parquet (untimed) and fingerprinted in DuckDB:
  ``count(*)``, ``sum(hash(every column))`` and ``bit_xor(hash(...))`` with every column cast to the table's type;
* ``spark``: ``count(*)`` and ``sum(xxhash64(every column))`` in the JVM (timed; not comparable to the reference
  fingerprint, so judged by equality with the base's Spark result, as ``bench/scale.py`` does);
* ``duckdb``: ``SELECT * FROM iceberg_scan('<metadata file>')`` into an Arrow table (timed), DuckDB's default settings
  (extensions from the PyPI wheels, automatic install/load off);
* ``duckdb_nocache``: the same with ``SET enable_external_file_cache = false`` (DuckDB 1.5.5's external file cache can
  hand the iceberg extension the wrong deletion vector; see ``icecompact_testing.engines``);
* ``pyiceberg``: ``table.scan().to_arrow()`` (timed).

Each engine's Arrow table is fingerprinted like the reference (untimed): ``correct`` when count and both hashes are
equal, else ``wrong`` with the rows missing and extra (``EXCEPT ALL`` both ways); an engine that raises is
``unsupported`` (its known "not supported" message, ``icecompact_testing.engines.UNSUPPORTED_MESSAGES``) or
``error``, with its message. Scan times: wall clock, median of ``--repeat``, files warm in the OS cache (the reference
read runs first).

``--trino``: Trino (``icecompact_testing.trino``) beside Spark instead, on a REST catalog with tables on S3 (a
throwaway SeaweedFS, which Trino reads through its native S3 file system): one table per format version compacted
in place (before -> MINOR -> MAJOR); per state Trino's every row is compared with Spark's (pinned snapshot), and both
engines' full scans are timed side by side (``TRINO_NOTES``).

Usage::

    .venv/bin/python bench/interop.py                              # s and m, format v2 and v3
    .venv/bin/python bench/interop.py --sizes s --format-versions 3
    .venv/bin/python bench/interop.py --trino --sizes s            # Trino vs Spark on S3

Results: ``bench/results/interop.{txt,json}``; with ``--trino``: ``bench/results/interop_trino.{txt,json}``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from lib.common import RESULTS_DIR, table_files  # noqa: E402  (sets sys.path, SPARK_LOCAL_IP)
from lib.contenders import register_clone  # noqa: E402
from lib.scans import full_scan  # noqa: E402

CATALOG_NAME = "interop"
NAMESPACE = "ns"
NOW = _dt.datetime(2026, 1, 1, tzinfo=_dt.timezone.utc)
MIB = 1024 * 1024
STATES = ("before", "after_minor", "after_major")
ENGINES = ("spark", "duckdb", "duckdb_nocache", "pyiceberg")
CORRECT, WRONG, UNSUPPORTED, ERROR, TIMEOUT = "correct", "wrong", "unsupported", "error", "timeout"
NOTES = [
    "outcome per engine and state: correct = the same multiset of rows as Spark's read of the same snapshot "
    "(count + sum and xor of a row hash over every column); wrong (-missing/+extra rows); unsupported = the "
    "engine refused with its known message (below); error = any other failure",
    "files: data / equality-delete / position-delete files / DVs of the snapshot read",
    "times: spark = count(*) + sum(xxhash64(all columns)) in the JVM (local[2]); duckdb, duckdb_nocache, "
    "pyiceberg = every row of every column into an Arrow table in this Python process",
    "timeout = the read was interrupted after --timeout seconds (DuckDB only: pyiceberg and Spark cannot be "
    "interrupted from here)",
    "duckdb = DuckDB's default settings; duckdb_nocache = SET enable_external_file_cache = false (DuckDB "
    "1.5.5's file cache can return the wrong deletion-vector blob when a Puffin file holds several DVs)",
]


class BenchmarkError(RuntimeError):
    pass


class ReadTimeout(RuntimeError):
    pass


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Fingerprints:
    """Order-independent fingerprints of row sets computed by one DuckDB connection, every column cast to the
    table's DuckDB types (as ``iceberg_scan`` reports them), so any source hashes alike."""

    def __init__(self, metadata_file: str) -> None:
        from icecompact_testing import engines as E

        self.con = E.duckdb_connect(external_file_cache=False)
        described = self.con.execute(f"DESCRIBE SELECT * FROM {E.duckdb_scan_sql(metadata_file)}").fetchall()
        self.columns = [(r[0], r[1]) for r in described]
        casts = ", ".join(f"CAST({_quote(n)} AS {t})" for n, t in self.columns)
        self.row_hash = f"hash({casts})"
        self.select = ", ".join(f"CAST({_quote(n)} AS {t}) AS {_quote(n)}" for n, t in self.columns)

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


class SizeRun:
    def __init__(self, spark: Any, catalog_cfg: Any, workdir: Path, size: str, format_version: int, seed: int,
                 repeat: int, timeout: float) -> None:
        self.spark, self.catalog_cfg, self.workdir = spark, catalog_cfg, workdir
        self.size, self.format_version, self.seed, self.repeat = size, format_version, seed, repeat
        self.timeout = timeout
        self.base = f"base_{size}_v{format_version}"
        self.tag = f"{size}_v{format_version}"

    def log(self, message: str) -> None:
        print(f"[{self.tag}] {message}", flush=True)

    def ref(self, name: str) -> str:
        return f"{CATALOG_NAME}.{NAMESPACE}.{name}"

    def clone(self, label: str, metadata_file: str) -> str:
        name = f"{label}_{self.tag}"
        register_clone(self.spark, CATALOG_NAME, NAMESPACE, name, metadata_file)
        return name

    def compact(self, name: str, mode: str) -> dict[str, Any]:
        from compaction.core.planner import plan
        from compaction.core.policy import CompactionPolicy
        from compaction.metadata.inspect import inspect_table
        from compaction.spark.job import run_group
        from compaction.spark.validation import ValidationLevel

        t0 = time.perf_counter()
        state = inspect_table(self.catalog_cfg, f"{NAMESPACE}.{name}")
        the_plan = plan(state, CompactionPolicy.resolve(state.properties), mode, NOW)
        parts = []
        for group in the_plan.groups:
            parts += run_group(self.spark, the_plan, group.group_id, level=ValidationLevel.parse("none"),
                               max_retries=3).partitions
        bad = [f"{p.label}: {p.status} {p.error or ''}" for p in parts if p.status not in ("committed", "no_op")]
        if bad or not parts or the_plan.deferred:
            raise BenchmarkError(f"{mode} on {name}: {bad[:5] or 'nothing planned'}; deferred {len(the_plan.deferred)}")
        return {"seconds": round(time.perf_counter() - t0, 2), "partitions": len(parts), "groups": len(the_plan.groups)}

    def files(self, name: str) -> dict[str, int]:
        return table_files(self.spark, self.ref(name))

    def reference(self, name: str, fp: Fingerprints) -> tuple[str, tuple[int, int, int]]:
        """Spark's read of ``name`` written to Parquet (untimed), and its fingerprint."""
        out = self.workdir / f"spark_{name}"
        shutil.rmtree(out, ignore_errors=True)
        self.spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        self.spark.table(self.ref(name)).write.parquet(str(out))
        relation = f"read_parquet('{out}/*.parquet')"
        return relation, fp.of(relation)

    def engine_read(self, engine: str, name: str) -> tuple[float, Any]:
        """(seconds, Arrow table) of one engine's full read of the table's current snapshot."""
        from icecompact_testing import engines as E

        table = self.catalog_cfg.load().load_table(f"{NAMESPACE}.{name}")
        gc.collect()
        if engine == "pyiceberg":
            t0 = time.perf_counter()
            arrow = E.pyiceberg_arrow(table)
            return time.perf_counter() - t0, arrow
        con = E.duckdb_connect(external_file_cache=engine == "duckdb")
        # DuckDB 1.5.5 applies equality deletes by an anti-join per data file: minutes at ``m``. A read is
        # interrupted after ``timeout`` seconds (``connection.interrupt()`` from a timer thread) and reported as such.
        timer = threading.Timer(self.timeout, con.interrupt)
        try:
            t0 = time.perf_counter()
            timer.start()
            try:
                arrow = con.execute(f"SELECT * FROM {E.duckdb_scan_sql(table.metadata_location)}").to_arrow_table()
            except Exception as exc:
                if time.perf_counter() - t0 >= self.timeout:
                    raise ReadTimeout(f"interrupted after {self.timeout:.0f} s") from exc
                raise
            return time.perf_counter() - t0, arrow
        finally:
            timer.cancel()
            con.close()

    def judge_state(self, state: str, name: str, fp: Fingerprints, spark_base: tuple[int, str]) -> dict[str, Any]:
        from icecompact_testing import engines as E

        ref_relation, ref_fp = self.reference(name, fp)
        result: dict[str, Any] = {"table": name, "files": self.files(name), "reference_rows": ref_fp[0], "engines": {}}
        # Spark: its own aggregate, judged against the base's (the reference *is* Spark's read).
        samples, spark_fp = [], None
        for _ in range(self.repeat):
            elapsed, spark_fp = full_scan(self.spark, self.ref(name))
            samples.append(elapsed)
        result["engines"]["spark"] = {"outcome": CORRECT if spark_fp == spark_base else WRONG,
                                      "seconds": round(statistics.median(samples), 3), "rows": spark_fp[0]}  # type: ignore[index]
        for engine in ENGINES[1:]:
            samples, info = [], {}
            for _ in range(self.repeat):
                try:
                    elapsed, arrow = self.engine_read(engine, name)
                except ReadTimeout as exc:
                    info = {"outcome": TIMEOUT, "message": str(exc), "seconds": self.timeout}
                    break
                except Exception as exc:  # noqa: BLE001 - recorded with the engine's message
                    message = f"{type(exc).__name__}: {exc}".split("\n\nStack Trace:")[0].strip()
                    info = {"outcome": UNSUPPORTED if E.is_unsupported(engine, message) else ERROR,
                            "message": message[:400]}
                    break
                samples.append(elapsed)
                fp.con.register("engine_rows", arrow)
                try:
                    got = fp.of("engine_rows")
                    info = {"outcome": CORRECT if got == ref_fp else WRONG, "rows": got[0]}
                    if got != ref_fp:
                        missing, extra = fp.diff(ref_relation, "engine_rows")
                        info.update({"missing_rows": missing, "extra_rows": extra})
                finally:
                    fp.con.unregister("engine_rows")
                    del arrow
            if samples:
                info["seconds"] = round(statistics.median(samples), 3)
            result["engines"][engine] = info
            self.log(f"{state:<12} {engine:<15} {info['outcome']:<12} "
                     + (f"{info['seconds']:7.2f} s" if "seconds" in info else info.get("message", "")[:120]))
        s = result["engines"]["spark"]
        self.log(f"{state:<12} {'spark':<15} {s['outcome']:<12} {s['seconds']:7.2f} s")
        shutil.rmtree(self.workdir / f"spark_{name}", ignore_errors=True)
        return result

    def run(self) -> dict[str, Any]:
        from icecompact_testing.bulk import BulkSpec, generate_bulk

        spec = BulkSpec.named(self.size, self.format_version, seed=self.seed)
        self.log(f"generating {self.size} v{self.format_version} ...")
        t0 = time.perf_counter()
        built = generate_bulk(self.spark, self.catalog_cfg, f"{NAMESPACE}.{self.base}", spec, replace=True,
                              log=lambda m: self.log(f"  {m}"))
        build_s = time.perf_counter() - t0
        metadata_file = self.catalog_cfg.load().load_table(f"{NAMESPACE}.{self.base}").metadata_location
        _, spark_base = full_scan(self.spark, self.ref(self.base))  # also warms the OS cache
        if spark_base[0] != built.live_rows:
            raise BenchmarkError(f"Spark counts {spark_base[0]} rows, the generator's model {built.live_rows}")
        minor_name, major_name = self.clone("minor", metadata_file), self.clone("major", metadata_file)
        self.log("our MINOR ...")
        minor = self.compact(minor_name, "minor")
        self.log(f"our MINOR: {minor}; our MAJOR ...")
        major = self.compact(major_name, "major")
        self.log(f"our MAJOR: {major}")
        fp = Fingerprints(metadata_file)
        try:
            states = {state: self.judge_state(state, name, fp, spark_base)
                      for state, name in zip(STATES, (self.base, minor_name, major_name))}
        finally:
            fp.close()
        return {"size": self.size, "format_version": self.format_version, "build_s": round(build_s, 1),
                "live_rows": built.live_rows, "stats": dict(built.stats), "minor": minor, "major": major,
                "states": states}


def render(r: dict[str, Any]) -> str:
    lines = [f"interop  {r['created_at']}  ({r['machine']['cpus']} cores shared, Spark {r['config']['spark_master']}; "
             f"duckdb {r['machine']['duckdb']} + iceberg/avro extensions {r['machine']['duckdb']} from PyPI, "
             f"pyiceberg {r['machine']['pyiceberg']}; median of {r['config']['repeat']}; absolute times are noisy)",
             "tables: bulk generator (icecompact_testing.bulk); MINOR and MAJOR (ours, validation none) on clones of "
             "the same metadata; every engine judged against Spark's read of the same snapshot"]
    for run in r["runs"]:
        lines += ["", f"== {run['size']} v{run['format_version']}: {run['live_rows']:,} live rows; our MINOR "
                      f"{run['minor']['seconds']:.1f} s, our MAJOR {run['major']['seconds']:.1f} s"]
        lines.append(f"   {'state':<13}{'files data/eq/pos/dv':>22}   " + "".join(f"{e:<30}" for e in ENGINES))
        for state in STATES:
            s = run["states"][state]
            f = s["files"]
            files = f"{f['data_files']}/{f['equality_delete_files']}/{f['position_delete_files']}/{f['dvs']}"
            cells = []
            for e in ENGINES:
                info = s["engines"][e]
                cell = info["outcome"]
                if info["outcome"] == TIMEOUT:
                    cell += f" >{info['seconds']:.0f}s"
                elif "seconds" in info:
                    cell += f" {info['seconds']:.2f}s"
                if info["outcome"] == WRONG and "missing_rows" in info:
                    cell += f" (-{info['missing_rows']}/+{info['extra_rows']})"
                cells.append(f"{cell:<30}")
            lines.append(f"   {state:<13}{files:>22}   " + "".join(cells))
        messages = {(e, info["message"]) for s in run["states"].values() for e, info in s["engines"].items()
                    if "message" in info}
        for e, m in sorted(messages):
            if m.startswith("interrupted after"):
                continue
            lines.append(f"   {e}: {m[:200]}")
    if not r.get("complete", True):
        lines[0] += "  [INCOMPLETE]"
    lines += ["", "notes:"] + [f"   {n}" for n in r["notes"]]
    return "\n".join(lines)


def write_results(args: argparse.Namespace, argv: list[str] | None, spark: Any, sizes: list[str], versions: list[int],
                  runs: list[dict[str, Any]], todo: list[tuple[str, int]], load_start: tuple[float, float, float],
                  t_start: float) -> str:
    import duckdb
    import pyiceberg

    result = {
        "benchmark": "interop",
        "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([".venv/bin/python", "bench/interop.py", *(argv if argv is not None else sys.argv[1:])]),
        "config": {"sizes": sizes, "format_versions": versions, "repeat": args.repeat, "seed": args.seed,
                   "timeout_s": args.timeout,
                   "spark_master": spark.sparkContext.master},
        "complete": len(runs) == len(todo),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "duckdb": duckdb.__version__,
                    "pyiceberg": pyiceberg.__version__, "loadavg_start": [round(x, 2) for x in load_start],
                    "loadavg_end": [round(x, 2) for x in os.getloadavg()]},
        "wall_s": round(time.perf_counter() - t_start, 1),
        "runs": runs,
        "notes": NOTES + ([] if len(runs) == len(todo) else [
            "INCOMPLETE: stopped after " + ", ".join(f"{r['size']} v{r['format_version']}" for r in runs)
            + " of " + ", ".join(f"{s} v{v}" for s, v in todo)]),
    }
    text = render(result)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.with_suffix(".json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    args.output.with_suffix(".txt").write_text(text + "\n")
    return text


# ------------------------------------------------------------------------------------------------------------
# --trino: Trino beside Spark, on a REST catalog with tables on S3 (a throwaway SeaweedFS)
# ------------------------------------------------------------------------------------------------------------

TRINO_CATALOG = "ice"
TRINO_NOTES = [
    "tables on a REST catalog + S3 (throwaway SeaweedFS, icecompact.demo.object_store), read by Spark and by a "
    "single-node Trino (icecompact_testing.trino, 2 GB heap) on the same 2 cores",
    "one table per format version, compacted in place: before -> our MINOR -> our MAJOR (SeaweedFS's REST catalog "
    "registers a metadata file without its snapshots, so there are no clones here as in the main run)",
    "outcome: correct = Trino's rows (every row, every column, pinned to the snapshot by FOR VERSION AS OF) are the "
    "same multiset as Spark's read of the same snapshot; wrong (-missing/+extra); error = Trino failed the query",
    "times: spark = count(*) + sum(xxhash64(all columns)) in the JVM (local[2]); trino = count(*) + checksum() of "
    "every column in Trino (wall clock of the query through its HTTP protocol); median of --repeat; speed-up = "
    "before / after, each engine against itself, measured side by side in this run",
]


def _trino_scan(trino: Any, identifier: tuple[str, str], columns: list[str], snapshot_id: int) -> tuple[float, Any]:
    from icecompact_testing import trino as T

    select = "count(*), " + ", ".join(f"checksum({_quote(c)})" for c in columns)
    t0 = time.perf_counter()
    result = trino.query(T.table_sql(TRINO_CATALOG, identifier, snapshot_id, select=select))
    return time.perf_counter() - t0, result.rows[0]


def trino_run(spark: Any, catalog_cfg: Any, trino: Any, workdir: Path, size: str, format_version: int, seed: int,
              repeat: int) -> dict[str, Any]:
    from icecompact_testing import trino as T
    from icecompact_testing.bulk import BulkSpec, generate_bulk
    from icecompact_testing.oracle import spark_rows

    run = SizeRun(spark, catalog_cfg, workdir, size, format_version, seed, repeat, 0.0)
    name = run.base
    identifier = (NAMESPACE, name)
    run.log(f"generating {size} v{format_version} on S3 ...")
    t0 = time.perf_counter()
    built = generate_bulk(spark, catalog_cfg, f"{NAMESPACE}.{name}", BulkSpec.named(size, format_version, seed=seed),
                          replace=True, log=lambda m: run.log(f"  {m}"))
    out: dict[str, Any] = {"size": size, "format_version": format_version, "build_s": round(time.perf_counter() - t0, 1),
                           "live_rows": built.live_rows, "states": {}}
    for state in STATES:
        if state == "after_minor":
            out["minor"] = run.compact(name, "minor")
            run.log(f"our MINOR: {out['minor']}")
        elif state == "after_major":
            out["major"] = run.compact(name, "major")
            run.log(f"our MAJOR: {out['major']}")
        table = catalog_cfg.load().load_table(identifier)
        snapshot_id = table.current_snapshot().snapshot_id
        columns = [f.name for f in table.schema().fields]
        expected = spark_rows(spark, run.ref(name), snapshot_id)
        info: dict[str, Any] = {"snapshot_id": snapshot_id, "files": run.files(name), "rows": sum(expected.values())}
        spark_samples = [full_scan(spark, run.ref(name))[0] for _ in range(repeat)]
        info["spark"] = {"outcome": CORRECT if sum(expected.values()) == built.live_rows else WRONG,
                         "seconds": round(statistics.median(spark_samples), 3)}
        try:
            read = T.read_rows(trino, TRINO_CATALOG, identifier, snapshot_id)
            trino_info: dict[str, Any] = {"outcome": CORRECT if read.rows == expected else WRONG,
                                          "fetch_s": round(read.seconds, 2)}
            if read.rows != expected:
                got = read.rows or Counter()
                trino_info.update({"missing_rows": sum((expected - got).values()),
                                   "extra_rows": sum((got - expected).values())})
            samples = [_trino_scan(trino, identifier, columns, snapshot_id)[0] for _ in range(repeat)]
            trino_info["seconds"] = round(statistics.median(samples), 3)
        except T.TrinoQueryError as exc:
            trino_info = {"outcome": ERROR, "message": str(exc)[:400]}
        info["trino"] = trino_info
        out["states"][state] = info
        run.log(f"{state:<12} spark {info['spark']['outcome']} {info['spark']['seconds']:.2f}s; trino "
                f"{trino_info['outcome']} {trino_info.get('seconds', float('nan')):.2f}s")
    return out


def render_trino(r: dict[str, Any]) -> str:
    lines = [f"interop_trino  {r['created']}  ({r['environment']})", *(["INCOMPLETE: " + r["incomplete"]]
                                                                       if r.get("incomplete") else [])]
    for run in r["runs"]:
        lines += ["", f"== {run['size']} v{run['format_version']}: {run['live_rows']:,} live rows; our MINOR "
                      f"{run['minor']['seconds']} s, our MAJOR {run['major']['seconds']} s",
                  f"   {'state':<14} {'files data/eq/pos/dv':>20}   {'spark':<22} {'trino':<22} trino row fetch"]
        for state in STATES:
            st = run["states"][state]
            f = st["files"]
            files = f"{f['data_files']}/{f['equality_delete_files']}/{f['position_delete_files']}/{f['dvs']}"
            sp, tr = st["spark"], st["trino"]
            lines.append(f"   {state:<14} {files:>20}   {sp['outcome'] + ' ' + format(sp['seconds'], '.2f') + 's':<22} "
                         + f"{tr['outcome'] + (' ' + format(tr['seconds'], '.2f') + 's' if 'seconds' in tr else ''):<22} "
                         + (f"{tr['fetch_s']:.1f}s" if "fetch_s" in tr else tr.get("message", "")[:100]))
        for engine in ("spark", "trino"):
            times = [run["states"][s][engine].get("seconds") for s in STATES]
            if all(times) and times[1] and times[2]:
                lines.append(f"   {engine} speed-up: after MINOR {times[0] / times[1]:.2f}x, after MAJOR "
                             f"{times[0] / times[2]:.2f}x")
    lines += ["", "notes:", *(f"   {n}" for n in TRINO_NOTES)]
    return "\n".join(lines) + "\n"


def trino_main(args: argparse.Namespace, argv: list[str] | None, sizes: list[str], versions: list[int]) -> int:
    from compaction.demo.object_store import start_object_store
    from compaction.spark.session import SparkSettings, build_session
    from icecompact_testing import trino as T

    workdir = Path(tempfile.mkdtemp(prefix="interop-trino-bench-"))
    t_start = time.perf_counter()
    load_start = os.getloadavg()
    store = start_object_store()
    trino = None
    spark = None
    try:
        catalog_cfg = store.catalog(CATALOG_NAME)
        # Trino's JVM starts while Spark starts and generates the first table.
        trino = T.start_trino({TRINO_CATALOG: T.rest_catalog_properties(store.catalog_properties())}, wait=False)
        spark = build_session([catalog_cfg], SparkSettings.from_environment(app_name="interop-trino-bench"))
        runs: list[dict[str, Any]] = []
        todo = [(size, version) for size in sizes for version in versions]
        output = args.output if args.output != RESULTS_DIR / "interop" else RESULTS_DIR / "interop_trino"
        for size, version in todo:
            runs.append(trino_run(spark, catalog_cfg, trino, workdir, size, version, args.seed, args.repeat))
            spark.sql(f"DROP TABLE IF EXISTS {CATALOG_NAME}.{NAMESPACE}.base_{size}_v{version}")
            load_end = os.getloadavg()
            result = {
                "benchmark": "interop_trino", "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                "argv": argv if argv is not None else sys.argv[1:],
                "environment": (f"{os.cpu_count()} cores shared, Spark local[2]; Trino {T.TRINO_VERSION} on "
                                f"{trino.java.name}, heap {T.DEFAULT_HEAP}; median of {args.repeat}; load average "
                                f"{load_start[0]:.1f} at start, {load_end[0]:.1f} now (other work on the machine: "
                                "absolute times are noisy, the ratios are measured side by side)"),
                "config": {"sizes": sizes, "format_versions": versions, "repeat": args.repeat, "seed": args.seed},
                "runs": runs, "wall_s": round(time.perf_counter() - t_start, 1), "notes": TRINO_NOTES,
                "incomplete": None if len(runs) == len(todo) else
                "stopped after " + ", ".join(f"{r['size']} v{r['format_version']}" for r in runs),
            }
            text = render_trino(result)
            output.with_suffix(".json").write_text(json.dumps(result, indent=2, default=str) + "\n")
            output.with_suffix(".txt").write_text(text)
        print("\n" + text, flush=True)
        print(f"wrote {output}.{{txt,json}}")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        if trino is not None:
            trino.stop()
        store.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="s,m", help="comma-separated bulk sizes (default s,m)")
    ap.add_argument("--format-versions", default="2,3", help="comma-separated format versions (default 2,3)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds before a DuckDB read is interrupted and reported as timeout (default 120)")
    ap.add_argument("--output", type=Path, default=RESULTS_DIR / "interop", help="result stem")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--trino", action="store_true",
                    help="Trino beside Spark instead, on a REST catalog + S3 (results: interop_trino.{txt,json})")
    args = ap.parse_args(argv)
    from icecompact_testing.bulk import SIZES

    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    versions = [int(v) for v in args.format_versions.split(",") if v.strip()]
    if not sizes or any(s not in SIZES for s in sizes) or any(v not in (2, 3) for v in versions) or args.repeat < 1:
        ap.error(f"--sizes must name sizes of {sorted(SIZES)}, --format-versions 2 and/or 3, --repeat >= 1")

    if args.trino:
        return trino_main(args, argv, sizes, versions)

    from compaction.catalog import CatalogConfig
    from compaction.spark.session import SparkSettings, build_session

    workdir = Path(tempfile.mkdtemp(prefix="interop-bench-"))
    catalog_cfg = CatalogConfig.sqlite(CATALOG_NAME, workdir / "catalog.db", workdir / "warehouse")
    t_start = time.perf_counter()
    load_start = os.getloadavg()
    spark = build_session([catalog_cfg], SparkSettings.from_environment(app_name="interop-bench"))
    try:
        runs: list[dict[str, Any]] = []
        todo = [(size, version) for size in sizes for version in versions]
        for size, version in todo:
            runs.append(SizeRun(spark, catalog_cfg, workdir, size, version, args.seed, args.repeat, args.timeout).run())
            for name in (f"base_{size}_v{version}", f"minor_{size}_v{version}", f"major_{size}_v{version}"):
                spark.sql(f"DROP TABLE IF EXISTS {CATALOG_NAME}.{NAMESPACE}.{name}")
            # Written after every run: a long run stopped part-way keeps what it measured (and says so).
            text = write_results(args, argv, spark, sizes, versions, runs, todo, load_start, t_start)
        print("\n" + text, flush=True)
        print(f"wrote {args.output}.{{txt,json}}")
        return 0
    finally:
        spark.stop()
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
