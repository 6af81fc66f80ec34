"""Scale benchmark: MAJOR and MINOR on production-shape streaming CDC tables of ~100 MB, ~500 MB and ~2 GB, every
contender side by side in one run, and how each one's cost grows with the size of the work.

The tables come from the bulk generator (``compaction.testing.bulk``, named sizes ``s``, ``m``, ``l``): 16 columns of
0.5-1 KB raw per row, ``days(ts)`` partitions, segment files just under the table's target file size, a stream of
small fragment files with an equality-delete file per partition and round (>= 50 in all), position deletes (v2
files / v3 DVs) on the segment files every few rounds. Each size's table is built once (its time is reported, not
part of any ratio) and every contender works on its own **clone** registered from the table's metadata file
(``CALL system.register_table``): identical snapshots, sequence numbers and files (shared paths, never deleted).

Contenders per size (order rotated between sizes; ``--repeat`` repeats them, medians reported):

* ``major_none`` / ``major_count`` / ``major_checksum``: our MAJOR in-process (``inspect_table`` + ``plan(major)`` +
  ``run_group`` of every job group) at each validation level, instrumented with the phase timers of
  ``bench/major.py`` (where the time goes);
* ``call``: ``CALL system.rewrite_data_files`` with the same target size (delete-file-threshold 1, starting sequence
  number kept, dangling deletes removed);
* ``parquet``: ``spark.read.parquet(<the data files our MAJOR rewrites>).write.parquet`` with the table's codec: the
  physical limit of a rewrite (no delete applied, no Iceberg metadata);
* ``minor_none`` / ``minor_count``: our MINOR of the same partitions, against ``major_none`` / ``major_count``;
* scans that read every column (``count(*)`` and ``sum(xxhash64(all columns))``): the base table (before), the
  ``minor_count`` clone, the ``major_count`` clone and the floor (a clone of the base whose delete files were all
  removed: the same data files with no delete; different rows, so not checked).

Measured for every contender: wall time, time per GB of data files in the plan, peak resident memory of the driver
JVM and of this Python process (sampled every 0.2 s by a thread), bytes read and written by Spark tasks (the input
and output metrics of the stages that ran, from Spark's status store), files before and after.

Correctness (the benchmark aborts otherwise): Spark's count of the base table equals the generator's model; every
compacted clone (ours, the CALL) returns the base table's (count, checksum); after MINOR no equality delete is left.

Usage::

    .venv/bin/python bench/scale.py                       # sizes s, m, l, format v2, repeat 1
    .venv/bin/python bench/scale.py --sizes s --repeat 2  # quick
    .venv/bin/python bench/scale.py --format-version 3    # DVs (results scale_v3.*)

Results: ``bench/results/scale.{txt,json,png}`` (``scale_v3.*`` for v3). Absolute times drift on this shared
2-core machine; ratios are measured side by side.
"""

from __future__ import annotations

import argparse
import contextlib
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

from _common import RESULTS_DIR, table_files  # noqa: E402  (sets sys.path, SPARK_LOCAL_IP)

import major as M  # noqa: E402  (bench/major.py: clones, CALL, plain Parquet, phase timers, scans)

CATALOG_NAME = M.CATALOG_NAME
NAMESPACE = M.NAMESPACE
NOW = _dt.datetime(2026, 1, 1, tzinfo=_dt.timezone.utc)
GB = 1024 ** 3
MIB = 1024 * 1024

GOALS = {
    "major_none_over_call": 1.05,
    "major_count_over_call": 1.15,
    "major_checksum_over_call": 1.4,
    "major_none_over_parquet": 1.3,
    "minor_over_major": 0.25,  # at the same validation level
    "scan_before_over_after_minor": 3.0,  # at least
    "scan_after_minor_over_after_major": 1.3,
    "per_gb_l_over_m": 1.1,
}
MAJOR = {"major_none": "none", "major_count": "count", "major_checksum": "checksum"}
MINOR = {"minor_none": "none", "minor_count": "count"}
CONTENDERS = ("major_none", "major_count", "major_checksum", "call", "parquet", "minor_none", "minor_count")


class BenchmarkError(RuntimeError):
    pass


# ------------------------------------------------------------------------------------------------------------
# Memory and I/O
# ------------------------------------------------------------------------------------------------------------
def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


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
                self.peak[k] = max(self.peak[k], _rss_bytes(pid))
            self._stop.wait(self.interval)

    def reset(self) -> None:
        self.peak = {k: _rss_bytes(pid) for k, pid in self.pids.items()}

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def stage_io(spark: Any, after_stage: int) -> tuple[int, int, int]:
    """(last stage id, input bytes, output bytes) summed over the stages with an id above ``after_stage``, from
    Spark's status store (kept with the UI disabled too)."""
    jvm = spark._jvm
    # AppStatusStore.stageList(statuses, details, withSummaries, unsortedQuantiles, taskStatus): Scala defaults are
    # not visible through py4j, so every argument is given.
    stages = spark._jsc.sc().statusStore().stageList(
        None, False, False, spark.sparkContext._gateway.new_array(jvm.double, 0), jvm.java.util.ArrayList())
    last, read, written = after_stage, 0, 0
    for i in range(int(stages.size())):
        stage = stages.apply(i)
        sid = int(stage.stageId())
        last = max(last, sid)
        if sid > after_stage:
            read += int(stage.inputBytes())
            written += int(stage.outputBytes())
    return last, read, written


# ------------------------------------------------------------------------------------------------------------
# One size
# ------------------------------------------------------------------------------------------------------------
class SizeRun:
    def __init__(self, spark: Any, catalog_cfg: Any, workdir: Path, size: str, format_version: int,
                 sampler: MemorySampler, seed: int) -> None:
        self.spark, self.catalog_cfg, self.workdir, self.size = spark, catalog_cfg, workdir, size
        self.format_version, self.sampler, self.seed = format_version, sampler, seed
        self.base = f"base_{size}_v{format_version}"
        self.stage = stage_io(spark, -1)[0]

    def build(self) -> dict[str, Any]:
        from compaction.testing.bulk import BulkSpec, generate_bulk

        spec = BulkSpec.named(self.size, self.format_version, seed=self.seed)
        print(f"[{self.size}] generating {self.size} v{self.format_version} ...", flush=True)
        result = generate_bulk(self.spark, self.catalog_cfg, f"{NAMESPACE}.{self.base}", spec, replace=True,
                               log=lambda m: print(f"[{self.size}]   {m}", flush=True))
        self.expected_live = result.live_rows
        self.base_ref = f"{CATALOG_NAME}.{NAMESPACE}.{self.base}"
        table = self.catalog_cfg.load().load_table(f"{NAMESPACE}.{self.base}")
        self.metadata_file = table.metadata_location
        return {"spec": {k: v for k, v in spec.__dict__.items()}, "stats": dict(result.stats)}

    def _measure(self, fn: Any) -> tuple[float, Any, dict[str, Any]]:
        gc.collect()
        self.sampler.reset()
        t0 = time.perf_counter()
        out = fn()
        elapsed = time.perf_counter() - t0
        peak = dict(self.sampler.peak)
        self.stage, read, written = stage_io(self.spark, self.stage)
        return elapsed, out, {"peak_rss_python": peak["python"], "peak_rss_jvm": peak["jvm"],
                              "spark_input_bytes": read, "spark_output_bytes": written}

    def ours(self, bench: M.Bench, mode: str, level_name: str, name: str) -> tuple[float, dict[str, Any]]:
        """Our compaction of a clone (mode major or minor), phase timers installed."""
        from compaction.core.planner import plan
        from compaction.core.policy import CompactionPolicy
        from compaction.inspect import inspect_table
        from compaction.spark.job import run_group
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
                the_plan = plan(state, CompactionPolicy.resolve(state.properties, overrides), mode, NOW)
            parts = []
            for group in the_plan.groups:
                with timer.section("run_group"):
                    parts += run_group(self.spark, the_plan, group.group_id, level=ValidationLevel.parse(level_name),
                                       max_retries=3).partitions
            elapsed = time.perf_counter() - t0
        bad = [f"{p.label}: {p.status} {p.error or ''}" for p in parts if p.status not in ("committed", "no_op")]
        if bad or not parts or the_plan.deferred:
            raise BenchmarkError(f"{mode} ({level_name}) on {name}: {bad[:5] or 'nothing planned'}; "
                                 f"deferred {len(the_plan.deferred)}")
        return elapsed, {"partitions": len(parts), "groups": len(the_plan.groups),
                         "commits": len({s for p in parts for s in p.commit_snapshot_ids}),
                         "phases": timer.snapshot()}

    def files(self, name: str) -> dict[str, int]:
        return table_files(self.spark, f"{CATALOG_NAME}.{NAMESPACE}.{name}")

    def committed_bytes(self, name: str) -> int:
        """Bytes of the files the clone's own commits added (data and delete files; Iceberg's
        ``added-files-size`` summary), whoever wrote them: Spark tasks or the driver (MINOR's delete files)."""
        base_ids = {int(r[0]) for r in self.spark.sql(
            f"SELECT snapshot_id FROM {self.base_ref}.snapshots").collect()}
        rows = self.spark.sql(f"SELECT snapshot_id, summary FROM {CATALOG_NAME}.{NAMESPACE}.{name}.snapshots").collect()
        return sum(int(r["summary"].get("added-files-size", 0)) for r in rows if int(r["snapshot_id"]) not in base_ids)

    def run(self, repeat: int, order_shift: int) -> dict[str, Any]:
        from compaction.core.planner import plan
        from compaction.core.policy import CompactionPolicy
        from compaction.inspect import inspect_table

        t0 = time.perf_counter()
        build = self.build()
        build["seconds"] = round(time.perf_counter() - t0, 2)
        before = self.files(self.base)
        t_warm, reference = M.full_scan(self.spark, self.base_ref)
        if reference[0] != self.expected_live:
            raise BenchmarkError(f"[{self.size}] Spark counts {reference[0]} rows, the generator's model "
                                 f"{self.expected_live}")
        state = inspect_table(self.catalog_cfg, f"{NAMESPACE}.{self.base}")
        policy = CompactionPolicy.resolve(state.properties, {"major_full_rewrite": True})
        base_plan = plan(state, policy, "major", NOW)
        data_paths = sorted({f for g in base_plan.groups for t in g.tasks for f in t.data_files})
        wanted = set(data_paths)
        plan_bytes = sum(f.size_bytes for p in state.partitions for f in p.data_files if f.path in wanted)
        codec = M.parquet_codec(data_paths[0])
        print(f"[{self.size}] base: {before}; plan(major): {len(data_paths)} data files, {plan_bytes / MIB:.0f} MiB; "
              f"warm-up scan {t_warm:.1f} s", flush=True)
        bench = M.Bench(self.spark, self.catalog_cfg, self.workdir, self.metadata_file, None, reference,  # type: ignore[arg-type]
                        policy.target_file_size_bytes, data_paths, codec)
        if order_shift == 0:
            # Untimed, first size only: the CALL, our MAJOR of one partition and our MINOR on throwaway clones (JIT,
            # class loading, first use of every code path), so that this cost lands on no contender.
            warm = bench.warm_up()
            t_minor, _ = self.ours(bench, "minor", "count", bench.clone("warmup_minor"))
            print(f"[{self.size}] warm-up (untimed): " + ", ".join(f"{k} {v:.1f} s" for k, v in warm.items())
                  + f", minor {t_minor:.1f} s", flush=True)
            self.stage = stage_io(self.spark, self.stage)[0]
        samples: dict[str, list[float]] = {c: [] for c in CONTENDERS}
        details: dict[str, list[dict[str, Any]]] = {c: [] for c in CONTENDERS}
        clones: dict[str, str] = {}
        for r in range(repeat):
            for contender in M.rotated(list(CONTENDERS), order_shift + r):
                if contender == "parquet":
                    out = self.workdir / f"parquet_{self.size}_{r}"
                    elapsed, (_, info), io = self._measure(lambda: bench.run_parquet(out))
                else:
                    name = bench.clone(contender)
                    if contender in MAJOR:
                        elapsed, (_, info), io = self._measure(lambda: self.ours(bench, "major", MAJOR[contender], name))
                    elif contender in MINOR:
                        elapsed, (_, info), io = self._measure(lambda: self.ours(bench, "minor", MINOR[contender], name))
                    else:
                        elapsed, (_, info), io = self._measure(lambda: bench.run_call(name))
                    clones[contender] = name
                    info["after"] = self.files(name)
                    info["committed_bytes"] = self.committed_bytes(name)
                    scan_t, result = M.full_scan(self.spark, f"{CATALOG_NAME}.{NAMESPACE}.{name}")
                    if result != reference:
                        raise BenchmarkError(f"[{self.size}] {contender}: clone {name} reads {result}, base {reference}")
                    if contender in MINOR and info["after"]["equality_delete_files"]:
                        raise BenchmarkError(f"[{self.size}] {contender} left equality deletes: {info['after']}")
                    self.stage = stage_io(self.spark, self.stage)[0]  # the check scan is not the contender's
                info.update(io)
                samples[contender].append(elapsed)
                details[contender].append(info)
                print(f"[{self.size}] {contender:<16} {elapsed:7.2f} s  {elapsed / (plan_bytes / GB):6.1f} s/GB  "
                      f"jvm {io['peak_rss_jvm'] / MIB:5.0f} MiB  python {io['peak_rss_python'] / MIB:5.0f} MiB  "
                      f"read {io['spark_input_bytes'] / MIB:6.0f} MiB  written {io['spark_output_bytes'] / MIB:6.0f} MiB",
                      flush=True)
        # The floor: the base's data files with every delete file removed (different content: not checked).
        floor = bench.clone("floor")
        _drop_deletes(self.spark, f"{CATALOG_NAME}.{NAMESPACE}.{floor}")
        scans = [("scan_before", self.base), ("scan_after_minor", clones["minor_count"]),
                 ("scan_after_major", clones["major_count"]), ("scan_floor", floor)]
        for r in range(repeat):
            for label, name in M.rotated(scans, order_shift + r):  # type: ignore[arg-type]
                elapsed, result = M.full_scan(self.spark, f"{CATALOG_NAME}.{NAMESPACE}.{name}")
                if label != "scan_floor" and result != reference:
                    raise BenchmarkError(f"[{self.size}] {label}: {result} != {reference}")
                samples.setdefault(label, []).append(elapsed)
                print(f"[{self.size}] {label:<16} {elapsed:7.2f} s", flush=True)
        self.stage = stage_io(self.spark, self.stage)[0]
        times = {k: M.summary(v) for k, v in samples.items()}
        med = {k: v["median_s"] for k, v in times.items()}
        breakdown = {c: M.median_breakdown([M.breakdown_of(d["phases"], s)
                                            for d, s in zip(details[c], samples[c])]) for c in MAJOR}
        minor_phases = {c: M.median_phases([d["phases"] for d in details[c]]) for c in MINOR}
        return {
            "size": self.size, "format_version": self.format_version, "build": build, "table_before": before,
            "plan": {"data_files": len(data_paths), "data_bytes": plan_bytes,
                     "target_file_size_bytes": policy.target_file_size_bytes, "codec": codec},
            "times": times,
            "seconds_per_gb": {k: round(v / (plan_bytes / GB), 3) for k, v in med.items()
                               if not k.startswith("scan")},
            "ratios": ratios_of(med),
            "work": {c: {k: v for k, v in details[c][-1].items() if k != "phases"} for c in CONTENDERS},
            "peak_rss": {c: {"jvm": max(d["peak_rss_jvm"] for d in details[c]),
                             "python": max(d["peak_rss_python"] for d in details[c])} for c in CONTENDERS},
            "breakdown": breakdown,
            "minor_phases": minor_phases,
            "reference_scan": list(reference),
        }


MINOR_TARGETS = ("prepare_group", "minor_compact", "commit_changes", "decide_work", "matched_positions",
                 "absorbed_positions", "collect_positions", "write_position_delete_files", "write_deletion_vectors",
                 "check_no_conflicting_changes", "scan_partition", "raw_read_blocker")


@contextlib.contextmanager
def minor_timers(timer: M.PhaseTimer) -> Iterator[None]:
    """The MINOR steps under the same timer (module attributes: looked up when called, so wrapping them is enough)."""
    from compaction.spark import job, minor

    saved = [(minor, name, getattr(minor, name)) for name in MINOR_TARGETS]
    saved += [(job, name, getattr(job, name)) for name in ("_run_minor_group", "minor_compact")
              if hasattr(job, name)]
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
        "major_none_over_parquet": med["major_none"] / med["parquet"],
        "call_over_parquet": med["call"] / med["parquet"],
        "minor_none_over_major_none": med["minor_none"] / med["major_none"],
        "minor_count_over_major_count": med["minor_count"] / med["major_count"],
    }
    if "scan_before" in med:
        r.update({
            "scan_before_over_after_minor": med["scan_before"] / med["scan_after_minor"],
            "scan_before_over_after_major": med["scan_before"] / med["scan_after_major"],
            "scan_after_minor_over_after_major": med["scan_after_minor"] / med["scan_after_major"],
            "scan_after_minor_over_floor": med["scan_after_minor"] / med["scan_floor"],
        })
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
        goal(f"{key} <= {limit}", {s: per_size[s]["ratios"][key] for s in judged}, lambda v, lim=limit: v <= lim)
    goal(f"minor_over_major (count) <= {GOALS['minor_over_major']}",
         {s: per_size[s]["ratios"]["minor_count_over_major_count"] for s in judged},
         lambda v: v <= GOALS["minor_over_major"])
    goal(f"scan_before_over_after_minor >= {GOALS['scan_before_over_after_minor']}",
         {s: per_size[s]["ratios"]["scan_before_over_after_minor"] for s in judged},
         lambda v: v >= GOALS["scan_before_over_after_minor"])
    goal(f"scan_after_minor_over_after_major <= {GOALS['scan_after_minor_over_after_major']}",
         {s: per_size[s]["ratios"]["scan_after_minor_over_after_major"] for s in judged},
         lambda v: v <= GOALS["scan_after_minor_over_after_major"])
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
    for c in CONTENDERS:
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
             "tables: bulk generator (compaction.testing.bulk), every contender on its own clone of the same metadata"]
    for size, s in r["sizes"].items():
        b, st, p = s["build"], s["build"]["stats"], s["plan"]
        lines += [
            "",
            f"== {size}: {s['table_before']['data_files']} data files ({s['table_before']['data_bytes'] / MIB:.0f} "
            f"MiB), {s['table_before']['equality_delete_files']} equality deletes, "
            f"{s['table_before']['position_delete_files']} position-delete files, {s['table_before']['dvs']} DVs; "
            f"{st['live_rows']:,} live of {st['data_rows']:,} rows; target {p['target_file_size_bytes'] / MIB:.0f} MiB",
            f"   generator: {st['bytes_written'] / MIB:.0f} MiB in {st['seconds']:.1f} s = {st['mib_per_second']} MiB/s "
            f"(goal >= 50 MB/s); plan(major) rewrites {p['data_files']} files, {p['data_bytes'] / MIB:.0f} MiB",
            f"   {'contender':<18}{'time':>9}{'s/GB':>8}{'JVM peak':>10}{'py peak':>9}{'read':>9}{'written':>9}"
            f"{'committed':>10}{'files after (data/eq/pos/dv)':>31}",
        ]
        for c in CONTENDERS:
            t = s["times"][c]["median_s"]
            w = s["work"][c]
            after = w.get("after")
            files = (f"{after['data_files']}/{after['equality_delete_files']}/{after['position_delete_files']}/"
                     f"{after['dvs']}" if after else f"{w.get('output_files', '')} parquet files")
            lines.append(f"   {c:<18}{t:8.2f}s{s['seconds_per_gb'][c]:8.1f}{w['peak_rss_jvm'] / MIB:9.0f}M"
                         f"{w['peak_rss_python'] / MIB:8.0f}M{w['spark_input_bytes'] / MIB:8.0f}M"
                         f"{w['spark_output_bytes'] / MIB:8.0f}M{w.get('committed_bytes', 0) / MIB:9.0f}M{files:>31}")
        for c in ("scan_before", "scan_after_minor", "scan_after_major", "scan_floor"):
            lines.append(f"   {c:<18}{s['times'][c]['median_s']:8.2f}s")
        lines.append("   ratios: " + ", ".join(f"{k} {v:.2f}x" for k, v in s["ratios"].items()))
    lines += ["", "goals (judged at m and l; s reported):"]
    for name, g in r["goals"].items():
        lines.append(f"   {'MET    ' if g['met'] else 'NOT MET'} {name}: "
                     + ", ".join(f"{k} {v}" for k, v in g["values"].items()))
    last = list(r["sizes"])[-1]
    bd = r["sizes"][last]["breakdown"]
    lines += ["", f"where our MAJOR spends its time at {last} (seconds, median; JSON has every size and the call tree):",
              "   " + f"{'':<60}" + "".join(f"{c.replace('major_', ''):>11}" for c in bd)]
    for k in bd["major_none"]:
        lines.append("   " + f"{k:<60}" + "".join(f"{bd[c][k]:11.2f}" for c in bd))
    mp = r["sizes"][last]["minor_phases"]["minor_count"]
    top = sorted(((v["median_s"], p) for p, v in mp.items() if p.count("/") <= 4), reverse=True)[:16]
    lines += [f"where our MINOR (count) spends its time at {last} (inclusive seconds, top call paths):"]
    lines += [f"   {p:<70}{t:8.2f}" for t, p in top]
    lines += ["", "notes:"] + [f"   {n}" for n in r.get("notes", [])]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="s,m,l", help="comma-separated named sizes (default s,m,l)")
    ap.add_argument("--format-version", type=int, choices=(2, 3), default=2)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--output", type=Path, default=None, help="result stem (default bench/results/scale[_v3])")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    args = ap.parse_args(argv)
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    from compaction.testing.bulk import SIZES

    if not sizes or any(s not in SIZES for s in sizes) or args.repeat < 1:
        ap.error(f"--sizes must name sizes of {sorted(SIZES)}; --repeat >= 1")
    stem = args.output or (RESULTS_DIR / ("scale" if args.format_version == 2 else "scale_v3"))

    from compaction.catalog import CatalogConfig
    from compaction.spark.session import SparkSettings, build_session

    workdir = Path(tempfile.mkdtemp(prefix="scale-bench-"))
    catalog_cfg = CatalogConfig.sqlite(CATALOG_NAME, workdir / "catalog.db", workdir / "warehouse")
    load_start = os.getloadavg()
    t_start = time.perf_counter()
    spark = build_session([catalog_cfg], SparkSettings.from_environment(app_name="scale-bench"))
    sampler = MemorySampler(int(spark._jvm.java.lang.ProcessHandle.current().pid()))
    try:
        per_size: dict[str, dict[str, Any]] = {}
        for i, size in enumerate(sizes):
            per_size[size] = SizeRun(spark, catalog_cfg, workdir, size, args.format_version, sampler,
                                     args.seed).run(args.repeat, i)
            # The next size needs the disk more than this one's clones do.
            spark.sql(f"DROP TABLE IF EXISTS {CATALOG_NAME}.{NAMESPACE}.base_{size}_v{args.format_version}")
        import pyiceberg
        import pyspark

        result = {
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
            "sizes": per_size,
            "goals": judge(per_size),
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
        if len(per_size) >= 2:
            chart(per_size, stem.with_suffix(".png"))
        text = render(result)
        print("\n" + text, flush=True)
        stem.parent.mkdir(parents=True, exist_ok=True)
        stem.with_suffix(".json").write_text(json.dumps(result, indent=2, default=str) + "\n")
        stem.with_suffix(".txt").write_text(text + "\n")
        print(f"wrote {stem}.{{txt,json{',png' if len(per_size) >= 2 else ''}}}")
        return 0
    finally:
        sampler.stop()
        spark.stop()
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
