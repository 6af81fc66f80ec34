"""Row-group copy: our MAJOR of partitions whose large files carry no delete, against Iceberg's
``CALL system.rewrite_data_files`` and against our own MAJOR with the copy turned off, side by side in one run.

The table shape (``icecompact_testing.bulk``, sizes ``m`` / ``l``): a streaming CDC table whose segment files carry no
delete (``deletes_in_fragments_only``: updates, deletes and position deletes hit only rows the stream wrote, so every
equality delete is ruled out for the segments by the key column's bounds) and, on v3, hold their row-lineage columns
(``segment_row_lineage``: as the files an earlier compaction wrote). The compaction target is ``--target-multiple``
times the segments' size (default 4): every segment is a "small file" to Iceberg's bin-pack, so the CALL decodes and
re-encodes them all, where our MAJOR concatenates their row groups and decodes only the fragments and the files a
delete applies to, all in one commit.

Contenders, each on its own clone registered from the base's metadata file (same snapshots, sequence numbers, files;
the order rotates between repeats):

* ``call``: ``CALL system.rewrite_data_files`` (delete-file-threshold 1, starting sequence number kept, dangling
  deletes removed, the target);
* ``major_copy``: our MAJOR in process (``inspect_table`` + ``plan(major)`` + ``run_groups``, the full rewrite, as
  ``scale.py``'s ``major_none``), validation ``none``, row-group copy on (the default);
* ``major_decode``: the same with ``compaction.row-group-copy.enabled=false`` (what our MAJOR did before).

Checked after every contender (the benchmark aborts otherwise): Spark's ``count(*)`` + ``sum(xxhash64(every
column))`` of the clone equals the base's; on the last repeat's clones every other reader is compared with its own
read of the CALL's clone (pyiceberg cannot read the base's equality deletes): DuckDB (``iceberg_scan``, external file
cache off) and pyiceberg (``to_arrow_batch_reader``), each read fingerprinted in DuckDB (count, ``sum`` and
``bit_xor`` of ``hash(every column)``); v3: Spark's ``(id, _row_id, _last_updated_sequence_number)`` fingerprint
equals the base's (row lineage kept).

``--profile``: one more copy contender per table with the phase timers of ``bench/lib/phases.py`` (untimed in the
ratios): where its time goes.

Scans (``--scans`` times each, rotated): Spark's full scan of the ``call`` and ``major_copy`` clones (the goal: the
copy's output scans within 1.1x of the CALL's).

Usage::

    .venv/bin/python bench/row_group_copy.py                               # m and l, v2 and v3, 3 repeats
    .venv/bin/python bench/row_group_copy.py --sizes s --formats 2 --repeat 1   # quick

Results: ``bench/results/row_group_copy.{txt,json}`` (written after every table).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from lib.common import RESULTS_DIR, embedded_spark  # noqa: E402  (sets sys.path, SPARK_LOCAL_IP)
from lib.contenders import drop_clone, procedure_table, register_clone, rotated
from lib.scans import full_scan

CATALOG_NAME = "rgcopy"
NAMESPACE = "bench"
NOW = _dt.datetime(2026, 1, 1, tzinfo=_dt.timezone.utc)
MIB = 1024 * 1024
CONTENDERS = ("call", "major_copy", "major_decode")
GOALS = {"major_copy_over_call": 0.5, "scan_copy_over_call": 1.1}


class BenchmarkError(RuntimeError):
    pass


def duckdb_fingerprint(con: Any, relation: str) -> tuple[int, int, int]:
    """count, sum and bit_xor of DuckDB's hash of every column of ``relation`` (order-independent)."""
    row = con.execute(f"SELECT count(*), sum(h)::HUGEINT, bit_xor(h) FROM "
                      f"(SELECT hash(COLUMNS(*)) AS h FROM {relation})").fetchone()
    return int(row[0]), int(row[1] or 0), int(row[2] or 0)


class TableRun:
    def __init__(self, spark: Any, catalog_cfg: Any, size: str, format_version: int, repeat: int, scans: int,
                 target_multiple: int, seed: int, min_row_group_bytes: int | None = None,
                 profile: bool = False) -> None:
        self.spark, self.catalog_cfg = spark, catalog_cfg
        self.size, self.format_version, self.repeat, self.scans = size, format_version, repeat, scans
        self.target_multiple, self.seed = target_multiple, seed
        self.min_row_group_bytes = min_row_group_bytes
        self.profile = profile
        self.tag = f"{size}/v{format_version}"
        self.clones = 0

    def ref(self, name: str) -> str:
        return f"{CATALOG_NAME}.{NAMESPACE}.{name}"

    def log(self, message: str) -> None:
        print(f"[{self.tag}] {message}", flush=True)

    def clone(self, label: str) -> str:
        self.clones += 1
        name = f"{label}_{self.size}_v{self.format_version}_{self.clones}"
        register_clone(self.spark, CATALOG_NAME, NAMESPACE, name, self.metadata_file)
        return name

    def drop_clone(self, name: str) -> None:
        drop_clone(self.spark, self.ref(name), self.base_snapshots)

    def call(self, name: str) -> dict[str, Any]:
        options = {"delete-file-threshold": "1", "remove-dangling-deletes": "true",
                   "use-starting-sequence-number": "true", "target-file-size-bytes": str(self.target)}
        sql = (f"CALL {CATALOG_NAME}.system.rewrite_data_files("
               f"table => '{procedure_table(CATALOG_NAME, NAMESPACE, name)}', options => map("
               + ", ".join(f"'{k}', '{v}'" for k, v in options.items()) + "))")
        row = self.spark.sql(sql).collect()[0].asDict()
        return {"rewritten_data_files": int(row["rewritten_data_files_count"]),
                "added_data_files": int(row["added_data_files_count"])}

    def profiled(self, name: str) -> tuple[float, dict[str, Any]]:
        """Our MAJOR with row-group copy on ``name``, phase timers installed (``bench/lib/phases.py`` plus the copy's
        own steps): where its time goes."""
        from lib.phases import PhaseTimer

        from compaction.spark import major, row_group_copy

        timer = PhaseTimer()
        extra = [(major, "copy_eligible", "copy_plan (footers read, groups split; each group's decode starts "
                                          "when it is split)"),
                 (major, "_rewrite_groups", "decode (Iceberg's runner on what is not copied, after the split)"),
                 (row_group_copy.PendingCopies, "result", "wait_for_copies (after the decode)")]
        saved = [(obj, attr, getattr(obj, attr)) for obj, attr, _ in extra]
        with timer.installed():
            for obj, attr, label in extra:
                setattr(obj, attr, timer.wrap(getattr(obj, attr), label))
            try:
                t0 = time.perf_counter()
                with timer.section("total"):
                    self.ours(name, True)
                elapsed = time.perf_counter() - t0
            finally:
                for obj, attr, original in saved:
                    setattr(obj, attr, original)
        return elapsed, {path: round(v["s"], 3) for path, v in sorted(timer.snapshot().items())}

    def ours(self, name: str, copy: bool) -> dict[str, Any]:
        from compaction.core.planner import plan
        from compaction.core.policy import CompactionPolicy
        from compaction.metadata.inspect import inspect_table
        from compaction.spark.job import run_groups
        from compaction.spark.validation import ValidationLevel

        state = inspect_table(self.catalog_cfg, f"{NAMESPACE}.{name}")
        overrides: dict[str, Any] = {"major_full_rewrite": True, "row_group_copy_enabled": copy,
                                     "target_file_size_bytes": self.target}
        if self.min_row_group_bytes is not None:
            overrides["row_group_copy_min_row_group_bytes"] = self.min_row_group_bytes
        the_plan = plan(state, CompactionPolicy.resolve(state.properties, overrides), "major", NOW)
        parts = []
        for result in run_groups(self.spark, the_plan, [g.group_id for g in the_plan.groups],
                                 level=ValidationLevel.parse("none"), max_retries=3):
            parts += result.partitions
        bad = [f"{p.label}: {p.status} {p.error or ''}" for p in parts if p.status not in ("committed", "no_op")]
        if bad or not parts:
            raise BenchmarkError(f"our MAJOR on {name}: {bad[:5] or 'nothing planned'}")
        return {"rewritten_data_files": sum(p.rewritten_data_files for p in parts),
                "added_data_files": sum(p.added_data_files for p in parts)}

    def summary_of(self, name: str) -> dict[str, Any]:
        rows = self.spark.sql(f"SELECT summary FROM {self.ref(name)}.snapshots ORDER BY committed_at DESC "
                              "LIMIT 1").collect()
        summary = rows[0]["summary"]
        files = self.spark.sql(f"SELECT count(*) AS n, sum(file_size_in_bytes) AS b FROM {self.ref(name)}.data_files"
                               ).collect()[0]
        return {"row_group_copies": summary.get("icecompact.row-group-copies"),
                "data_files_after": int(files["n"]), "data_bytes_after": int(files["b"] or 0)}

    def lineage(self, name: str) -> tuple[int, str]:
        from pyspark.sql import functions as F

        df = self.spark.table(self.ref(name)).select("id", "_row_id", "_last_updated_sequence_number")
        row = df.agg(F.count(F.lit(1)).alias("n"), F.sum(F.xxhash64("id", "_row_id", "_last_updated_sequence_number")
                                                            .cast("decimal(38,0)")).alias("h")).collect()[0]
        return int(row["n"]), str(row["h"])

    def readers(self, name: str) -> dict[str, tuple[int, int, int]]:
        """Each other reader's fingerprint of ``name`` (DuckDB with its file cache off; pyiceberg's batches)."""
        from icecompact_testing import engines as E

        table = self.catalog_cfg.load().load_table((NAMESPACE, name))
        con = E.duckdb_connect(external_file_cache=False)
        try:
            duck = duckdb_fingerprint(con, E.duckdb_scan_sql(table.metadata_location))
            reader = table.scan().to_arrow_batch_reader()
            con.register("pyiceberg_batches", reader)
            pyice = duckdb_fingerprint(con, "pyiceberg_batches")
        finally:
            con.close()
        return {"duckdb": duck, "pyiceberg": pyice}

    def run(self) -> dict[str, Any]:
        from icecompact_testing.bulk import BulkSpec, generate_bulk

        spec = BulkSpec.named(self.size, self.format_version, seed=self.seed, deletes_in_fragments_only=True,
                              segment_row_lineage=self.format_version >= 3)
        self.target = spec.target_file_size * self.target_multiple
        t0 = time.perf_counter()
        self.log("generating ...")
        result = generate_bulk(self.spark, self.catalog_cfg, f"{NAMESPACE}.base_{self.size}_v{self.format_version}",
                               spec, replace=True, log=self.log)
        base = f"base_{self.size}_v{self.format_version}"
        base_table = self.catalog_cfg.load().load_table((NAMESPACE, base))
        self.metadata_file = base_table.metadata_location
        self.base_snapshots = {s.snapshot_id for s in base_table.snapshots()}
        build_s = time.perf_counter() - t0
        _, reference = full_scan(self.spark, self.ref(base))
        if reference[0] != result.live_rows:
            raise BenchmarkError(f"Spark counts {reference[0]} rows, the generator's model {result.live_rows}")
        base_files = self.spark.sql(f"SELECT count(*) AS n, sum(file_size_in_bytes) AS b "
                                    f"FROM {self.ref(base)}.data_files").collect()[0]
        self.log(f"base: {int(base_files['n'])} data files, {int(base_files['b']) / MIB:.0f} MiB; target "
                 f"{self.target / MIB:.0f} MiB")
        # Untimed warm-up on throwaway clones: JIT and class loading land on no contender.
        for warm, run in (("warm_call", self.call), ("warm_ours", lambda n: self.ours(n, True))):
            name = self.clone(warm)
            run(name)
            self.drop_clone(name)
        samples: dict[str, list[float]] = {c: [] for c in CONTENDERS}
        work: dict[str, dict[str, Any]] = {}
        last: dict[str, str] = {}
        for r in range(self.repeat):
            for contender in rotated(list(CONTENDERS), r):
                name = self.clone(contender)
                t = time.perf_counter()
                info = self.call(name) if contender == "call" else self.ours(name, contender == "major_copy")
                elapsed = time.perf_counter() - t
                _, check = full_scan(self.spark, self.ref(name))
                if check != reference:
                    raise BenchmarkError(f"{contender}: clone {name} reads {check}, the base {reference}")
                samples[contender].append(elapsed)
                work[contender] = {**info, **self.summary_of(name)}
                if contender in last:
                    self.drop_clone(last[contender])
                last[contender] = name
                self.log(f"{contender:<13} {elapsed:7.2f} s  {work[contender]}")
        # pyiceberg cannot read the base (equality deletes): every reader's read of our clones is compared with its
        # read of the CALL's clone, whose rows Spark found equal to the base's.
        readers_call = self.readers(last["call"])
        readers: dict[str, Any] = {}
        for contender in ("major_copy", "major_decode"):
            got = self.readers(last[contender])
            readers[contender] = {k: got[k] == readers_call[k] for k in got}
            if not all(readers[contender].values()):
                raise BenchmarkError(f"{contender}: readers differ from their read of the CALL's output: {got} vs "
                                     f"{readers_call}")
        lineage_kept = None
        if self.format_version >= 3:
            base_lineage = self.lineage(base)
            lineage_kept = {c: self.lineage(n) == base_lineage for c, n in last.items()}
            if not all(lineage_kept.values()):
                raise BenchmarkError(f"row lineage changed: {lineage_kept}")
        scan_samples: dict[str, list[float]] = {"call": [], "major_copy": []}
        for r in range(self.scans):
            for contender in rotated(list(scan_samples), r):
                elapsed, _ = full_scan(self.spark, self.ref(last[contender]))
                scan_samples[contender].append(elapsed)
        profile = None
        if self.profile:
            name = self.clone("profile")
            elapsed, profile = self.profiled(name)
            profile["elapsed"] = round(elapsed, 3)
            self.drop_clone(name)
            self.log(f"profile of major_copy ({elapsed:.2f} s): {profile}")
        for name in last.values():
            self.drop_clone(name)
        med = {c: statistics.median(v) for c, v in samples.items()}
        scan_med = {c: statistics.median(v) for c, v in scan_samples.items()}
        ratios = {
            "major_copy_over_call": med["major_copy"] / med["call"],
            "major_decode_over_call": med["major_decode"] / med["call"],
            "major_copy_over_major_decode": med["major_copy"] / med["major_decode"],
            "scan_copy_over_call": scan_med["major_copy"] / scan_med["call"],
        }
        return {"size": self.size, "format_version": self.format_version, "build_seconds": round(build_s, 1),
                "generator": dict(result.stats), "base_data_files": int(base_files["n"]),
                "base_data_bytes": int(base_files["b"]), "target_file_size_bytes": self.target,
                "samples": samples, "median_s": med, "scan_samples": scan_samples, "scan_median_s": scan_med,
                "ratios": ratios, "work": work, "readers_equal": readers, "lineage_kept": lineage_kept,
                "profile_major_copy": profile,
                "goals": {k: {"value": round(ratios[k], 3), "goal": v, "met": ratios[k] <= v}
                          for k, v in GOALS.items()}}


def render(runs: list[dict[str, Any]], header: str) -> str:
    lines = [header, ""]
    for r in runs:
        if "error" in r:
            lines.append(f"== {r['size']} v{r['format_version']}: FAILED {r['error']}")
            continue
        lines.append(f"== {r['size']} v{r['format_version']}: {r['base_data_files']} data files "
                     f"({r['base_data_bytes'] / MIB:.0f} MiB), target {r['target_file_size_bytes'] / MIB:.0f} MiB; "
                     f"table built in {r['build_seconds']} s")
        for c in CONTENDERS:
            w = r["work"][c]
            lines.append(f"   {c:<13} median {r['median_s'][c]:7.2f} s  (samples "
                         f"{', '.join(f'{s:.2f}' for s in r['samples'][c])})  rewritten {w['rewritten_data_files']} "
                         f"-> {w['added_data_files']} files; after {w['data_files_after']} data files "
                         f"{w['data_bytes_after'] / MIB:.0f} MiB; row-group copies {w['row_group_copies']}")
        lines.append(f"   scan after    call {r['scan_median_s']['call']:.2f} s, major_copy "
                     f"{r['scan_median_s']['major_copy']:.2f} s (median of {len(r['scan_samples']['call'])})")
        lines.append("   ratios: " + ", ".join(f"{k} {v:.2f}x" for k, v in r["ratios"].items()))
        lines.append("   readers equal to their read of the CALL's output: " + ", ".join(
            f"{c}: {', '.join(k for k, ok in v.items() if ok)}" for c, v in r["readers_equal"].items())
            + (f"; row lineage kept: {r['lineage_kept']}" if r["lineage_kept"] is not None else ""))
        if r.get("profile_major_copy"):
            prof = r["profile_major_copy"]
            lines.append(f"   where major_copy spends its time (one extra run, {prof['elapsed']:.2f} s, seconds per "
                         "call path; copies overlap the decode):")
            for path, seconds in prof.items():
                if path != "elapsed" and seconds >= 0.01:
                    lines.append(f"      {path:<90} {seconds:6.2f}")
        for k, g in r["goals"].items():
            lines.append(f"   {'MET    ' if g['met'] else 'NOT MET'} {k} {g['value']:.2f} (goal <= {g['goal']})")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="m,l")
    ap.add_argument("--formats", default="2,3")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scans", type=int, default=3)
    ap.add_argument("--target-multiple", type=int, default=4)
    ap.add_argument("--seed", type=int, default=20261128)
    ap.add_argument("--min-row-group-bytes", type=int, default=None,
                    help="compaction.row-group-copy.min-row-group-bytes (default: the policy's; the segments of "
                         "sizes xs and s are below it)")
    ap.add_argument("--output", type=Path, default=RESULTS_DIR / "row_group_copy")
    ap.add_argument("--profile", action="store_true",
                    help="one more major_copy per table with phase timers (untimed in the ratios): where its time goes")
    args = ap.parse_args(argv)
    sizes = [s for s in args.sizes.split(",") if s]
    formats = [int(f) for f in args.formats.split(",") if f]

    load_start = os.getloadavg()[0]
    started = time.perf_counter()
    runs: list[dict[str, Any]] = []
    with embedded_spark(CATALOG_NAME, "row-group-copy-bench", NAMESPACE) as (spark, catalog_cfg):
        for size in sizes:
            for fv in formats:
                try:
                    runs.append(TableRun(spark, catalog_cfg, size, fv, args.repeat, args.scans,
                                         args.target_multiple, args.seed, args.min_row_group_bytes,
                                         args.profile).run())
                except Exception as exc:  # noqa: BLE001 - one table failing keeps the others' figures
                    runs.append({"size": size, "format_version": fv, "error": f"{type(exc).__name__}: {exc}"})
                    print(f"[{size}/v{fv}] FAILED: {exc}", flush=True)
                header = (f"row_group_copy  {_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')}  "
                          f"(2 cores shared, Spark local[2]; median of {args.repeat} per contender; load average "
                          f"{load_start:.2f} at start, {os.getloadavg()[0]:.2f} now; "
                          f"{(time.perf_counter() - started) / 60:.1f} min so far)")
                text = render(runs, header)
                args.output.with_suffix(".txt").write_text(text + "\n")
                args.output.with_suffix(".json").write_text(json.dumps(
                    {"argv": sys.argv[1:] if argv is None else argv, "runs": runs}, indent=2, default=str) + "\n")
        print("\n" + text, flush=True)
        return 0 if all("error" not in r and all(g["met"] for g in r["goals"].values()) for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
