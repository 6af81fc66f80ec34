"""Where our compaction spends its time: wall-clock timers wrapped around functions of our Spark job in this process
(``PhaseTimer``; nested calls give a path like ``a/b/c``; monkeypatched in this process only, nothing under
``compaction/`` changes), the median of several runs' timings, and one run's timings grouped into the questions of
the MAJOR benchmarks (``breakdown_of``)."""

from __future__ import annotations

import contextlib
import functools
import statistics
import threading
import time
from collections import defaultdict
from typing import Any, Callable, Iterator


class PhaseTimer:
    """Wall-clock time per call path. Each thread has its own stack: our job reads the base snapshot's rows in a
    background thread while Iceberg's rewrite action runs, and those sections are recorded under
    ``background/...`` (they overlap the main thread's time, so they are not part of its breakdown)."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._local = threading.local()
        self._lock = threading.Lock()

    def _stack(self) -> list[str]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = [] if threading.current_thread() is threading.main_thread() else ["background"]
        return stack

    def reset(self) -> None:
        with self._lock:
            self.totals.clear()
            self.calls.clear()
        self._local = threading.local()

    @contextlib.contextmanager
    def section(self, label: str) -> Iterator[None]:
        stack = self._stack()
        stack.append(label)
        path = "/".join(stack)
        t0 = time.perf_counter()
        try:
            yield
        finally:
            with self._lock:
                self.totals[path] += time.perf_counter() - t0
                self.calls[path] += 1
            stack.pop()

    def wrap(self, fn: Callable[..., Any], label: str) -> Callable[..., Any]:
        timer = self

        @functools.wraps(fn)
        def timed_call(*args: Any, **kwargs: Any) -> Any:
            with timer.section(label):
                return fn(*args, **kwargs)

        return timed_call

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        from compaction.spark import gate, group_reads, job, jvm, major, partition_files, task

        # A name is wrapped in every module of the job that calls it (each module looks up its own global).
        job_side = (job, task, group_reads)
        by_name = [("run_task", "run_task"), ("_run_major_group", "major_group"), ("rewrite_partition", "rewrite_action"),
                   ("remove_dangling_deletes", "cleanup"), ("find_tagged_snapshot", "find_tagged_snapshot"),
                   ("scan_partition", "scan_partition"), ("major_compact", "major_compact"), ("validate", "validate"),
                   ("fingerprint", "fingerprint"), ("snapshot_fingerprints", "snapshot_fingerprints"),
                   ("_group_rows", "group_rows_setup"), ("touched_partitions", "touched_partitions"),
                   ("rows_predicate", "rows_predicate")]
        targets = [(module, name, label) for name, label in by_name for module in job_side if hasattr(module, name)]
        targets += [
            (jvm, "load_table", "load_table"),
            (group_reads.GroupRows, "_read", "group_base_rows"),
            (major, "rewrite_partition", "rewrite_action"),
            (major, "remove_dangling_deletes", "cleanup"),
            (major, "_rewritten_groups", "rewrite_files"),
            (major, "_commit_rewrite", "rewrite_commit"),
            (major, "find_dangling_deletes", "find_dangling_deletes"),
            (major, "_check_no_older_data_added", "check_no_older_data"),
            (major, "find_tagged_snapshot", "find_tagged_snapshot"),
            (major, "scan_partition", "scan_partition"),
            (partition_files, "_position_delete_targets", "position_delete_targets"),
            (partition_files, "_read_position_delete_targets", "read_position_delete_targets"),
            (partition_files.PartitionFiles, "refine_position_deletes", "refine_position_deletes"),
            (gate, "_wait_for_dml_window", "dml_window"),
            (jvm.DeferredCleanup, "committed", "deferred_cleanup"),
            (major, "_landed", "landed"),
        ]
        saved = [(obj, name, getattr(obj, name)) for obj, name, _ in targets]
        saved.append((group_reads, "partition_fingerprints_query", group_reads.partition_fingerprints_query))
        timer = self
        build_group_query = group_reads.partition_fingerprints_query

        def group_query(*args: Any, **kwargs: Any) -> Any:
            # Built in the calling thread, run in the group's read-ahead thread (recorded under background/).
            with timer.section("group_rows_build"):
                run = build_group_query(*args, **kwargs)
            return timer.wrap(run, "group_rows_read")

        try:
            for obj, name, label in targets:
                setattr(obj, name, self.wrap(getattr(obj, name), label))
            group_reads.partition_fingerprints_query = group_query  # type: ignore[assignment]
            yield
        finally:
            for obj, name, original in saved:
                setattr(obj, name, original)

    def snapshot(self) -> dict[str, dict[str, float]]:
        return {p: {"s": self.totals[p], "calls": self.calls[p]} for p in self.totals}


def median_phases(runs: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    paths = sorted({p for r in runs for p in r})
    out = {}
    for p in paths:
        vals = [r.get(p, {"s": 0.0, "calls": 0}) for r in runs]
        out[p] = {"median_s": round(statistics.median(v["s"] for v in vals), 4),
                  "calls": int(statistics.median(v["calls"] for v in vals))}
    return out


def median_breakdown(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: round(statistics.median(r[k] for r in runs), 3) for k in runs[0]}


def breakdown_of(phases: dict[str, dict[str, float]], total: float) -> dict[str, float]:
    """Where one of our runs spends its time (seconds), grouped into the questions of the issue."""
    def get(path: str) -> float:
        return phases.get(path, {"s": 0.0})["s"]

    # The group action (one Iceberg action for the job group's MAJOR partitions) and the per-partition path
    # (a group with one MAJOR partition, or the fallback after a failed group action) are summed.
    rt, mg = "run_group/run_task", "run_group/major_group"

    def compacting(suffix: str) -> float:
        return get(f"{rt}/major_compact/{suffix}") + get(f"{mg}/{suffix}")

    def validating(suffix: str) -> float:
        return get(f"{rt}/validate/{suffix}") + get(f"{mg}/validate/{suffix}")

    validate = get(f"{rt}/validate") + get(f"{mg}/validate") + get(f"{mg}/snapshot_fingerprints")
    fingerprints = (validating("fingerprint") + validating("snapshot_fingerprints") + validating("group_base_rows")
                    + get(f"{mg}/snapshot_fingerprints"))
    before_scan = get(f"{rt}/scan_partition")  # the group's before and after scans are both under compacting()
    out = {
        "total": total,
        "inspect_plan": get("inspect") + get("plan"),
        # The rewrite: Iceberg's planner and runner write the files, our one commit replaces them and removes the
        # delete files left dangling (found before it, checked after it).
        "iceberg_rewrite_action": compacting("rewrite_action"),
        "rewrite/files (Iceberg's planner and runner)": compacting("rewrite_action/rewrite_files"),
        "rewrite/find_dangling_deletes": compacting("rewrite_action/find_dangling_deletes"),
        "rewrite/commit": compacting("rewrite_action/rewrite_commit"),
        "rewrite/check_no_older_data": compacting("rewrite_action/check_no_older_data"),
        "cleanup_commit": compacting("cleanup"),
        "cleanup/find_dangling_deletes": compacting("cleanup/find_dangling_deletes"),
        "cleanup/read_position_delete_targets (Spark job)":
            compacting("cleanup/find_dangling_deletes/read_position_delete_targets"),
        "cleanup/check_no_older_data": compacting("cleanup/check_no_older_data"),
        "validation": validate,
        "validation/fingerprint_reads": fingerprints,
        "validation/fingerprint_reads/wait_for_group_base_rows": validating("group_base_rows"),
        "validation/touched_partitions": validating("touched_partitions"),
        "group_base_rows_setup (run_group, before the partitions)": get("run_group/group_rows_setup"),
        "background/group_base_rows_read (overlaps)": get("background/group_rows_read"),
        "background/other_read_ahead (overlaps)": get("background/fingerprint"),
        "validation/leftover_scan": validating("scan_partition") + validating("refine_position_deletes"),
        "file_scans_before_after": before_scan + compacting("scan_partition"),
        "load_table+find_tagged_snapshot": (get(f"{rt}/load_table") + get(f"{mg}/load_table")
                                            + compacting("find_tagged_snapshot")),
    }
    accounted = sum(v for k, v in out.items() if k not in ("total",) and "/" not in k)
    out["other (loop, py4j, run_group outside run_task)"] = total - accounted
    out["run_task_total"] = get(rt) + get(mg)
    return {k: round(v, 3) for k, v in out.items()}
