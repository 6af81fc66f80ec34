"""Evolved-table benchmark: an Iceberg table whose partition spec evolved half-way runs within 1.3x the time
of a single-spec table with the same data and deletes, and never slower than Iceberg's own full rewrite of it.

Tables, at a size of the bulk generator (``icecompact_testing.bulk``, ``s`` by default, as in ``bench/scale.py``), same
seed, so the same rows, files contents and deletes:

* ``single``: the bulk table as ``bench/scale.py`` builds it (``days(ts)`` from the start: every equality delete is
  scoped to its day partition);
* ``evolved``: the same generator on a table that starts **unpartitioned** (spec 0) and gains ``days(ts)`` (spec 1)
  after half of the streaming rounds: the base segments and the first half's fragments are files of spec 0, and the
  first half's equality deletes are **global** (written under the unpartitioned spec: they apply to older data files
  of every partition of every spec, Iceberg spec "Scan Planning"); the second half's are scoped to a day.

Contenders, each on its own clone (``register_table`` from the table's metadata file: same snapshots, sequence numbers
and files), all in one run:

* ``ours``: ``compaction.ops.runner.run_table`` (inspect, plan, one spark-submit per job group, record) as a user's
  ``icecompact run --mode M`` runs it, for each mode of ``--modes`` on each table, validation ``count``;
* ``call``: ``CALL system.rewrite_data_files`` (delete-file-threshold 1: every file a delete applies to, starting
  sequence number kept, dangling deletes removed) then ``CALL system.rewrite_position_delete_files``
  (rewrite-all), in this process's Spark session (no spark-submit start), on each table.

Correctness (the benchmark aborts otherwise): both base tables return the same (count, checksum over every column);
every compacted clone returns it too. Counted for each of our runs: data files rewritten (``deleted-data-files`` of
its snapshots), files rewritten twice (written by one of the run's commits and removed by a later one), commits.

Where the time goes: every progress line of the run is time-stamped (inspect + plan, spark-submit start = the
``spark-submit`` line to the job's first line, each step of the job: its rewrite action, cleanup, validation reads,
conversion, recording), printed for the evolved runs.

Usage::

    .venv/bin/python bench/evolved.py                     # s, v2, modes major and auto
    .venv/bin/python bench/evolved.py --size xs --modes major   # quick

Results: ``bench/results/evolved.{txt,json}``. Times on this shared 2-core machine drift; ratios are side by side.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lib.common import RESULTS_DIR, table_files  # noqa: E402  (sets sys.path, SPARK_LOCAL_IP)
from lib.contenders import procedure_table, register_clone  # noqa: E402

CATALOG_NAME = "bench"
NAMESPACE = "ns"
GOALS = {"evolved_over_single": 1.3, "evolved_over_call": 1.0}


class BenchmarkError(RuntimeError):
    pass


def build_evolved(spark: Any, catalog_cfg: Any, name: str, spec: Any, log: Any) -> Any:
    """The bulk table of ``spec`` on a table created unpartitioned that gains ``days(ts)`` after half the rounds.

    Equality deletes keep the single-spec table's meaning: before the evolution they are written under the
    unpartitioned spec (global); after it, a partitioned equality delete would apply only to data files of its own
    spec and partition (Iceberg spec, "Scan Planning"), so the keys that have a version in a file of the old spec
    (every key written before the evolution) go to a global delete file, the others to one of their day. A key lives
    in one day only, so a global delete removes exactly the rows the single-spec table's day-scoped delete does."""
    import numpy as np

    from compaction.spark import equality_deletes as E
    from compaction.spark import jvm as J
    from icecompact_testing import bulk
    from compaction.demo.tables import create_table as create_iceberg_table

    ref = f"{catalog_cfg.name}.{NAMESPACE}.{name}"
    columns = ", ".join(f"{c} {t}" for c, t in bulk.COLUMNS)
    create_iceberg_table(spark, ref, columns, "", bulk.table_properties(spec), replace=True)
    evolve_after = max(1, spec.rounds // 2)
    state: dict[str, Any] = {"first_new_id": None, "extra": []}

    class Evolving(bulk.BulkGenerator):
        def stream_files(self, jtable: Any, round_: int) -> tuple[list[Any], list[Any]]:
            data, deletes = super().stream_files(jtable, round_)
            deletes += state["extra"]
            state["extra"] = []
            return data, deletes

    def evolve(round_: int) -> None:
        if round_ != evolve_after:
            return
        spark.sql(f"ALTER TABLE {ref} ADD PARTITION FIELD days(ts)").collect()
        table = J.load_table(spark, ref)
        table.refresh()
        state["spec0"] = next(s for s in J.spec_ids(table) if not table.specs().get(s).isPartitioned())
        state["empty"] = J.partition_data(spark, table.specs().get(state["spec0"]), ())
        generator.jspec = table.spec()
        generator.partition_data = {p: J.partition_data(spark, generator.jspec, (bulk.FIRST_DAY + p,))
                                    for p in range(spec.partitions)}
        state["first_new_id"] = generator.next_id
        log(f"evolved: spec {int(table.spec().specId())} days(ts) after round {round_}")

    generator = Evolving(spark, ref, spec, log=log, after_round=evolve)
    original_partition_data, original_write = J.partition_data, E.write_equality_delete_file

    def tolerant(spark_: Any, jspec: Any, values: Any) -> Any:  # the generator gives a day to every file
        return original_partition_data(spark_, jspec, values if jspec.isPartitioned() else ())

    def split_write(spark_: Any, jtable: Any, cols: Any, keys: Any, **kw: Any) -> Any:
        first_new = state["first_new_id"]
        if first_new is None:
            return original_write(spark_, jtable, cols, keys, **kw)
        old = keys.column(0).to_numpy() < first_new
        written = []
        if old.any():
            written.append(original_write(spark_, jtable, cols, keys.filter(old), spec_id=state["spec0"],
                                          partition_struct=state["empty"], writer=kw.get("writer")))
        if not old.all():
            written.append(original_write(spark_, jtable, cols, keys.filter(np.logical_not(old)), **kw))
        state["extra"] += written[1:]
        return written[0]

    J.partition_data = tolerant  # type: ignore[assignment]
    E.write_equality_delete_file = split_write  # type: ignore[assignment]
    try:
        return generator.run()
    finally:
        J.partition_data = original_partition_data  # type: ignore[assignment]
        E.write_equality_delete_file = original_write  # type: ignore[assignment]


def full_scan(spark: Any, ref: str) -> tuple[int, str]:
    from pyspark.sql import functions as F

    df = spark.table(ref)
    row = df.agg(F.count(F.lit(1)).alias("n"),
                 F.sum(F.xxhash64(*[F.col(c) for c in df.columns]).cast("decimal(38,0)")).alias("h")).collect()[0]
    return int(row["n"]), str(row["h"])


class Bench:
    def __init__(self, spark: Any, catalog_cfg: Any, workdir: Path) -> None:
        self.spark, self.catalog_cfg, self.workdir = spark, catalog_cfg, workdir
        self.clones = 0
        self.metadata: dict[str, str] = {}

    def ref(self, name: str) -> str:
        return f"{CATALOG_NAME}.{NAMESPACE}.{name}"

    def clone(self, base: str, label: str) -> str:
        self.clones += 1
        name = f"{label}_{self.clones}"
        register_clone(self.spark, CATALOG_NAME, NAMESPACE, name, self.metadata[base])
        return name

    def snapshots(self, name: str) -> list[tuple[int, dict[str, str]]]:
        rows = self.spark.sql(f"SELECT snapshot_id, summary FROM {self.ref(name)}.snapshots "
                              f"ORDER BY committed_at").collect()
        return [(int(r["snapshot_id"]), dict(r["summary"])) for r in rows]

    def data_paths(self, name: str) -> set[str]:
        return {str(r[0]) for r in self.spark.sql(f"SELECT file_path FROM {self.ref(name)}.data_files").collect()}

    def rewrite_counts(self, base_snapshots: set[int], base_files: set[str], name: str) -> dict[str, int]:
        """Data files the run's own snapshots removed, and how many of them the run had written itself (rewritten
        twice: a partition's files rewritten again by a later commit of the same run)."""
        self.spark.sql(f"REFRESH TABLE {self.ref(name)}").collect()
        ours = [(sid, s) for sid, s in self.snapshots(name) if sid not in base_snapshots]
        removed = sum(int(s.get("deleted-data-files", 0)) for _, s in ours)
        originals_removed = len(base_files - self.data_paths(name))
        return {"commits": len(ours), "data_files_removed": removed,
                "base_files_rewritten": originals_removed, "rewritten_twice": removed - originals_removed}

    def run_ours(self, base: str, mode: str) -> dict[str, Any]:
        from compaction.core.plan import CompactionMode
        from compaction.ledger import Ledger
        from compaction.ops.runner import run_table

        name = self.clone(base, f"{base}_{mode}")
        base_snapshots = {sid for sid, _ in self.snapshots(name)}
        base_files = self.data_paths(name)
        lines: list[tuple[float, str]] = []
        ledger = Ledger.open(f"sqlite:///{self.workdir / 'ledger.db'}")
        t0 = time.perf_counter()
        try:
            report = run_table(self.catalog_cfg, f"{NAMESPACE}.{name}", mode=CompactionMode(mode), ledger=ledger,
                               validation="count",
                               progress=lambda m: lines.append((time.perf_counter() - t0, str(m))))
        finally:
            elapsed = time.perf_counter() - t0
            ledger.close()
        bad = [f"{o.partition_label}: {o.status.value} {o.reason or ''}" for o in report.outcomes
               if o.status.value not in ("committed", "no_op", "skipped")]
        if bad or report.errors:
            raise BenchmarkError(f"ours {mode} on {name}: {bad[:5]} {report.errors[:3]}")
        plan = report.plan
        kinds: dict[str, int] = {}
        for d in plan.decisions:
            kinds[d.kind.value] = kinds.get(d.kind.value, 0) + 1
        return {
            "clone": name, "seconds": round(elapsed, 2), "groups": len(plan.groups),
            "partitions": len(plan.decisions), "decisions": kinds,
            "full_rewrite_tasks": sum(1 for t in plan.tasks if t.full_rewrite),
            "outcomes": sorted({o.status.value for o in report.outcomes}),
            "re_evaluated": sum(1 for o in report.outcomes if "changed since planning" in (o.reason or "")),
            **self.rewrite_counts(base_snapshots, base_files, name),
            "files_after": table_files(self.spark, self.ref(name)),
            "scan": full_scan(self.spark, self.ref(name)),
            "profile": profile(lines, elapsed),
            "lines": [[round(t, 2), m] for t, m in lines],
        }

    def run_call(self, base: str) -> dict[str, Any]:
        name = self.clone(base, f"{base}_call")
        base_snapshots = {sid for sid, _ in self.snapshots(name)}
        base_files = self.data_paths(name)
        target = int(self.spark.sql(f"SHOW TBLPROPERTIES {self.ref(name)} ('write.target-file-size-bytes')")
                     .collect()[0]["value"])
        t0 = time.perf_counter()
        data = self.spark.sql(
            f"CALL {CATALOG_NAME}.system.rewrite_data_files("
            f"table => '{procedure_table(CATALOG_NAME, NAMESPACE, name)}', options => map("
            f"'delete-file-threshold', '1', 'remove-dangling-deletes', 'true', "
            f"'use-starting-sequence-number', 'true', 'target-file-size-bytes', '{target}'))").collect()[0].asDict()
        t1 = time.perf_counter()
        pos = self.spark.sql(
            f"CALL {CATALOG_NAME}.system.rewrite_position_delete_files("
            f"table => '{procedure_table(CATALOG_NAME, NAMESPACE, name)}', "
            f"options => map('rewrite-all', 'true'))").collect()[0].asDict()
        elapsed = time.perf_counter() - t0
        return {"clone": name, "seconds": round(elapsed, 2), "rewrite_data_files_s": round(t1 - t0, 2),
                "rewrite_position_delete_files_s": round(elapsed - (t1 - t0), 2),
                "rewrite_data_files": {k: int(v or 0) for k, v in data.items()},
                "rewrite_position_delete_files": {k: int(v or 0) for k, v in pos.items()},
                **self.rewrite_counts(base_snapshots, base_files, name),
                "files_after": table_files(self.spark, self.ref(name)),
                "scan": full_scan(self.spark, self.ref(name))}


_STEP = re.compile(r"^icecompact: ")


def profile(lines: list[tuple[float, str]], total: float) -> list[dict[str, Any]]:
    """Where a run's time went, from its time-stamped progress lines: each line's time is the time until the next
    line (what the step it announces took), except that the spark-submit line's is the JVM start (until the job's
    first own line) and the first line's includes inspect + plan."""
    steps: list[dict[str, Any]] = []
    previous_t, previous = 0.0, "inspect + plan"
    for t, line in lines + [(total, "end")]:
        label = previous
        if previous.startswith("group ") and "spark-submit" in previous and _STEP.match(line):
            label = "spark-submit start (JVM, Spark session, catalog)"
        steps.append({"step": label[:160], "seconds": round(t - previous_t, 2)})
        previous_t, previous = t, line
    return steps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="s")
    ap.add_argument("--format-version", type=int, choices=(2, 3), default=2)
    ap.add_argument("--modes", default="major,auto", help="comma-separated modes of our runs (major, auto, minor)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--output", type=Path, default=None, help="results stem (default bench/results/evolved)")
    args = ap.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    stem = args.output or RESULTS_DIR / "evolved"

    from compaction.catalog import CatalogConfig
    from compaction.spark.session import SparkSettings, build_session
    from icecompact_testing.bulk import BulkSpec, generate_bulk

    workdir = Path(tempfile.mkdtemp(prefix="evolved-bench-"))
    os.environ.setdefault("ICECOMPACT_HOME", str(workdir / "home"))
    load_start = os.getloadavg()
    t_start = time.perf_counter()
    catalog_cfg = CatalogConfig.sqlite(CATALOG_NAME, workdir / "catalog.db", workdir / "warehouse")
    spark = build_session([catalog_cfg], SparkSettings.from_environment(app_name="evolved-bench"))
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG_NAME}.{NAMESPACE}").collect()
    bench = Bench(spark, catalog_cfg, workdir)
    spec = BulkSpec.named(args.size, args.format_version, seed=args.seed)

    def log(m: str) -> None:
        print(f"  {m}", flush=True)

    built: dict[str, Any] = {}
    for base, build in (("single", lambda: generate_bulk(spark, catalog_cfg, f"{NAMESPACE}.single", spec,
                                                         replace=True, log=log)),
                        ("evolved", lambda: build_evolved(spark, catalog_cfg, "evolved", spec, log))):
        print(f"building {base} ({args.size}, v{args.format_version}) ...", flush=True)
        t0 = time.perf_counter()
        res = build()
        bench.metadata[base] = catalog_cfg.load().load_table(f"{NAMESPACE}.{base}").metadata_location
        specs = spark.sql(f"SELECT DISTINCT spec_id FROM {bench.ref(base)}.files").collect()
        partitions = spark.sql(f"SELECT count(*) AS n FROM {bench.ref(base)}.partitions").collect()[0]["n"]
        built[base] = {"build_s": round(time.perf_counter() - t0, 1), "stats": dict(res.stats),
                       "specs_with_files": sorted(int(r[0]) for r in specs), "partitions": int(partitions),
                       "files": table_files(spark, bench.ref(base)), "scan": full_scan(spark, bench.ref(base))}
        print(f"  {built[base]}", flush=True)
    if built["single"]["scan"] != built["evolved"]["scan"]:
        raise BenchmarkError(f"the two tables differ: {built['single']['scan']} != {built['evolved']['scan']}")
    reference = built["single"]["scan"]

    runs: dict[str, Any] = {"call": {}}
    # Untimed: a CALL on a throwaway clone (class loading and JIT of the rewrite path in this JVM, which would
    # otherwise land on whichever CALL runs first). Then the CALLs, then ours, single before evolved for every mode.
    bench.run_call("single")
    for base in ("single", "evolved"):
        print(f"CALL on {base} ...", flush=True)
        runs["call"][base] = bench.run_call(base)
        print(f"  {runs['call'][base]['seconds']} s", flush=True)
    for mode in modes:
        runs[mode] = {}
        for base in ("single", "evolved"):
            print(f"ours --mode {mode} on {base} ...", flush=True)
            runs[mode][base] = bench.run_ours(base, mode)
            r = runs[mode][base]
            print(f"  {r['seconds']} s, {r['commits']} commits, {r['data_files_removed']} data files rewritten "
                  f"({r['rewritten_twice']} twice), {r['re_evaluated']} re-evaluated", flush=True)
    for contender, by_base in runs.items():
        for base, r in by_base.items():
            if tuple(r["scan"]) != tuple(reference):
                raise BenchmarkError(f"{contender} on {base}: rows changed {r['scan']} != {reference}")

    ratios: dict[str, Any] = {}
    for mode in modes:
        ev, single = runs[mode]["evolved"], runs[mode]["single"]
        submit = sum(s["seconds"] for s in ev["profile"] if s["step"].startswith("spark-submit start"))
        ratios[mode] = {
            "evolved_over_single": round(ev["seconds"] / single["seconds"], 3),
            "evolved_over_call": round(ev["seconds"] / runs["call"]["evolved"]["seconds"], 3),
            "evolved_without_submit_start_over_call": round(
                (ev["seconds"] - submit) / runs["call"]["evolved"]["seconds"], 3),
        }
    import pyiceberg
    import pyspark

    result = {
        "benchmark": "evolved",
        "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([".venv/bin/python", "bench/evolved.py", *(argv if argv is not None else sys.argv[1:])]),
        "config": {"size": args.size, "format_version": args.format_version, "modes": modes, "seed": args.seed,
                   "spark_master": SparkSettings.from_environment().master, "validation": "count"},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "pyspark": pyspark.__version__,
                    "pyiceberg": pyiceberg.__version__, "loadavg_start": [round(x, 2) for x in load_start],
                    "loadavg_end": [round(x, 2) for x in os.getloadavg()]},
        "tables": built, "runs": runs, "ratios": ratios, "goals": GOALS,
        "wall_s": round(time.perf_counter() - t_start, 1),
    }
    stem.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{stem}.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    text = render(result)
    Path(f"{stem}.txt").write_text(text)
    print(text)
    spark.stop()
    return 0


def render(r: dict[str, Any]) -> str:
    out = [f"Evolved-table benchmark, {r['created_at']}: {r['command']}",
           f"size {r['config']['size']}, v{r['config']['format_version']}, validation count, ours through "
           f"spark-submit ({r['config']['spark_master']}), the CALL in-process; load average "
           f"{r['machine']['loadavg_start']} -> {r['machine']['loadavg_end']}; wall {r['wall_s']} s", ""]
    for base, t in r["tables"].items():
        f = t["files"]
        out.append(f"  {base:<8} {t['partitions']:>3} partitions, specs with files {t['specs_with_files']}: "
                   f"{f['data_files']} data files ({f['data_bytes'] / 2**20:.0f} MiB), "
                   f"{f['equality_delete_files']} equality / {f['position_delete_files'] + f['dvs']} position "
                   f"delete files; {t['scan'][0]:,} rows")
    out += ["", f"  {'contender':<22} {'table':<8} {'seconds':>8} {'commits':>8} {'rewritten':>10} {'twice':>6} "
                f"{'re-eval':>8}"]
    for contender, by_base in r["runs"].items():
        for base, x in by_base.items():
            label = "CALL data+pos deletes" if contender == "call" else f"ours --mode {contender}"
            out.append(f"  {label:<22} {base:<8} {x['seconds']:>8.2f} {x['commits']:>8} "
                       f"{x['data_files_removed']:>10} {x['rewritten_twice']:>6} {x.get('re_evaluated', '-'):>8}")
    out += ["", "Ratios (goal: evolved/single <= 1.3, evolved/CALL <= 1.0):"]
    for mode, ratio in r["ratios"].items():
        ok1 = "met" if ratio["evolved_over_single"] <= GOALS["evolved_over_single"] else "NOT met"
        ok2 = "met" if ratio["evolved_over_call"] <= GOALS["evolved_over_call"] else "NOT met"
        out.append(f"  --mode {mode:<6} evolved/single {ratio['evolved_over_single']:.2f} ({ok1}); evolved/CALL "
                   f"{ratio['evolved_over_call']:.2f} ({ok2}); without our spark-submit start "
                   f"{ratio['evolved_without_submit_start_over_call']:.2f}")
    for mode in r["ratios"]:
        for base in ("evolved", "single"):
            x = r["runs"][mode][base]
            out += ["", f"Where the time goes: ours --mode {mode} on {base} ({x['seconds']:.1f} s; plan: "
                        f"{x['decisions']}, {x['groups']} job group(s)):"]
            for s in x["profile"]:
                if s["seconds"] >= 0.3:
                    out.append(f"  {s['seconds']:7.2f} s  {s['step']}")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
