"""Where our MAJOR's time goes against Iceberg's ``CALL rewrite_data_files``, on the cluster and in the driver.

One bulk table (``icecompact_testing.bulk``, a named size, v2 or v3), warmed up untimed, then our MAJOR at
validation ``none`` (full rewrite, in-process ``run_groups``, as ``scale.py``'s ``major_none``) and the CALL (the same
options as ``scale.py``) alternately on clones of the same metadata, ``--rounds`` times each (the order swapped every
round). For each contender, from Spark's status store: the wall time during which at least one Spark stage ran
(``busy``; the rest is the driver alone: planning, py4j calls, commits), and the executors' task time and CPU time
summed over tasks (task time above CPU time is waiting: I/O, or the 2 cores taken by the driver's threads). Then one
more run of each with every stage listed (start and end relative to the contender's start, tasks, task time), and for
ours, where its main thread was while the driver was alone before the first stage and after the last one (sampled
stacks, ``lib/sampling.py``).

Writes ``bench/results/call_gap_<size>.{txt,json}`` (``--output`` stem to change).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lib.common import RESULTS_DIR  # noqa: E402  (sets sys.path, SPARK_LOCAL_IP)
from lib.io_stats import stage_io, stage_list, stage_time  # noqa: E402
from lib.phases import breakdown_of, median_breakdown  # noqa: E402
from lib.sampling import MainThreadSampler  # noqa: E402
from lib.scans import full_scan  # noqa: E402
from scale import CATALOG_NAME, NAMESPACE, NOW, MemorySampler, ScaleBench, SizeRun, Storage  # noqa: E402


def _stages_after(spark: Any, after: int) -> list[tuple[float, float, int, float, str]]:
    rows = []
    for s in stage_list(spark):
        if int(s.stageId()) <= after:
            continue
        a, b = s.submissionTime(), s.completionTime()
        rows.append((a.get().getTime() / 1000 if a.isDefined() else 0.0, b.get().getTime() / 1000 if b.isDefined()
                     else 0.0, int(s.numTasks()), int(s.executorRunTime()) / 1000, str(s.name())[:70]))
    return sorted(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="m")
    ap.add_argument("--format-version", type=int, choices=(2, 3), default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--output", type=Path, default=None,
                    help="results stem (default bench/results/call_gap_<size>, _v3 added for format v3)")
    args = ap.parse_args(argv)
    if args.output is None:
        args.output = RESULTS_DIR / f"call_gap_{args.size}{'_v3' if args.format_version == 3 else ''}"

    from compaction.catalog import CatalogConfig
    from compaction.core.planner import plan
    from compaction.core.policy import CompactionPolicy
    from compaction.metadata.inspect import inspect_table
    from compaction.spark.session import SparkSettings, build_session

    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    workdir = Path(tempfile.mkdtemp(prefix="call-gap-"))
    storage = Storage("local", CatalogConfig.sqlite(CATALOG_NAME, workdir / "catalog.db", workdir / "warehouse"))
    spark = build_session([storage.catalog_cfg], SparkSettings.from_environment(app_name="call-gap"))
    sampler = MemorySampler(int(spark._jvm.java.lang.ProcessHandle.current().pid()))
    run = SizeRun(spark, storage, workdir, args.size, args.format_version, sampler, 20261123)
    run.build()
    state = inspect_table(storage.catalog_cfg, f"{NAMESPACE}.{run.base}")
    policy = CompactionPolicy.resolve(state.properties, {"major_full_rewrite": True})
    data_paths = sorted({f for g in plan(state, policy, "major", NOW).groups for t in g.tasks for f in t.data_files})
    _, reference = full_scan(spark, run.base_ref)
    bench = ScaleBench(spark, storage.catalog_cfg, workdir, run.metadata_file, None, reference,  # type: ignore[arg-type]
                       policy.target_file_size_bytes, data_paths, "zstd")
    bench.configure(storage, run.base_ref)
    bench.warm_up()
    run.ours(bench, "major", "none", bench.clone("warmup_major"))

    phases: list[dict[str, float]] = []

    def contender(kind: str, name: str) -> tuple[float, dict[str, float], float]:
        """(seconds, its stages' times, when it started): the check scan after it is neither."""
        last = stage_io(spark, -1)[0]
        started = time.time()
        t0 = time.perf_counter()
        if kind == "ours":
            _, info = run.ours(bench, "major", "none", name)
            phases.append(breakdown_of(info["phases"], time.perf_counter() - t0))
        else:
            bench.run_call(name)
        elapsed = time.perf_counter() - t0
        timing = stage_time(spark, last)
        if full_scan(spark, run.ref(name))[1] != reference:
            raise RuntimeError(f"{kind}: clone {name} does not read as the base")
        return elapsed, timing, started

    load = __import__("os").getloadavg()[0]
    say(f"call_gap  {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}  size {args.size} v{args.format_version}, "
        f"{len(data_paths)} data files; {args.rounds} rounds, order swapped each round; load average {load:.2f}")
    samples: dict[str, list[dict[str, float]]] = {"ours": [], "call": []}
    for r in range(args.rounds):
        for kind in (["ours", "call"] if r % 2 == 0 else ["call", "ours"]):
            elapsed, stages, _ = contender(kind, bench.clone(kind))
            timing = {"s": round(elapsed, 3), **stages}
            timing["driver_alone_s"] = round(elapsed - timing["busy_s"], 3)
            samples[kind].append(timing)
            say(f"   round {r + 1} {kind:<5} {elapsed:6.2f} s: spark busy {timing['busy_s']:5.2f} s, driver alone "
                f"{timing['driver_alone_s']:5.2f} s, tasks {timing['task_run_s']:5.1f} s ({timing['task_cpu_s']:5.1f}"
                f" s CPU)")
    medians = {k: {m: round(statistics.median(x[m] for x in v), 3) for m in v[0]} for k, v in samples.items()}
    say("medians:")
    for kind, m in medians.items():
        say(f"   {kind:<5} {m['s']:6.2f} s: spark busy {m['busy_s']:5.2f} s, driver alone {m['driver_alone_s']:5.2f} s, "
            f"tasks {m['task_run_s']:5.1f} s ({m['task_cpu_s']:5.1f} s CPU)")
    say(f"   ours / call: time {medians['ours']['s'] / medians['call']['s']:.2f}x, spark busy "
        f"{medians['ours']['busy_s'] / medians['call']['busy_s']:.2f}x, task time "
        f"{medians['ours']['task_run_s'] / medians['call']['task_run_s']:.2f}x, task CPU "
        f"{medians['ours']['task_cpu_s'] / medians['call']['task_cpu_s']:.2f}x")
    breakdown = median_breakdown(phases)
    say("where our MAJOR's time goes (seconds, median of the rounds; scale.py's phase timers):")
    for k, v in breakdown.items():
        if v:
            say(f"   {k:<62}{v:7.2f}")
    traces: dict[str, list[list[Any]]] = {}
    driver_windows: dict[str, dict[str, Any]] = {}
    for kind in ("ours", "call"):
        last = stage_io(spark, -1)[0]
        with MainThreadSampler() as sampler_of_main:
            elapsed, _, t0 = contender(kind, bench.clone(kind + "_trace"))
        rows = [r for r in _stages_after(spark, last) if t0 <= r[0] <= t0 + elapsed]  # not the clone's, not the check's
        traces[kind] = [[round(a - t0, 2), round(b - t0, 2), n, round(rt, 2), nm] for a, b, n, rt, nm in rows]
        say(f"stages of one more {kind} run ({elapsed:.2f} s; seconds from its start):")
        for a, b, n, rt, nm in traces[kind]:
            say(f"   {a:6.2f} .. {b:6.2f}  {n:4d} tasks  task time {rt:6.2f} s  {nm}")
        if not rows:
            continue
        # The driver alone before the first stage and after the last one, where our run and the CALL differ most
        # (between stages the driver waits for the cluster in both): our functions it was in, sampled.
        first, end = min(r[0] for r in rows), max(r[1] for r in rows)
        driver_windows[kind] = {}
        for label, lo, hi in (("before the first stage", t0, first), ("after the last stage", end, t0 + elapsed)):
            inside = sampler_of_main.inclusive(lo, hi) if kind == "ours" else []
            driver_windows[kind][label] = {"s": round(hi - lo, 3), "inside": [[n, round(v, 3)] for n, v in inside]}
            say(f"   driver {label}: {hi - lo:.2f} s" + (", of which in (sampled main thread, inclusive):"
                                                            if inside else ""))
            for name, seconds in inside:
                say(f"      {seconds:6.3f} s  {name}")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.with_suffix(".txt").write_text("\n".join(lines) + "\n")
    args.output.with_suffix(".json").write_text(json.dumps(
        {"benchmark": "call_gap", "size": args.size, "format_version": args.format_version, "rounds": args.rounds,
         "samples": samples, "medians": medians, "our_breakdown": breakdown, "traces": traces,
         "driver_windows": driver_windows}, indent=1))
    spark.stop()
    shutil.rmtree(workdir, ignore_errors=True)  # every clone's files: gigabytes at l
    return 0


if __name__ == "__main__":
    sys.exit(main())
