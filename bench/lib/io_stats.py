"""Bytes read and written by Spark tasks, from Spark's status store: what a contender or a query made Spark read."""

from __future__ import annotations

from typing import Any


def stage_list(spark: Any) -> list[Any]:
    """Every stage Spark's status store keeps (its ``StageData``), the UI disabled too."""
    jvm = spark._jvm
    # AppStatusStore.stageList(statuses, details, withSummaries, unsortedQuantiles, taskStatus): Scala defaults are
    # not visible through py4j, so every argument is given.
    stages = spark._jsc.sc().statusStore().stageList(
        None, False, False, spark.sparkContext._gateway.new_array(jvm.double, 0), jvm.java.util.ArrayList())
    return [stages.apply(i) for i in range(int(stages.size()))]


def stage_io(spark: Any, after_stage: int) -> tuple[int, int, int]:
    """(last stage id, input bytes, output bytes) summed over the stages with an id above ``after_stage``, from
    Spark's status store (kept with the UI disabled too)."""
    last, read, written = after_stage, 0, 0
    for stage in stage_list(spark):
        sid = int(stage.stageId())
        last = max(last, sid)
        if sid > after_stage:
            read += int(stage.inputBytes())
            written += int(stage.outputBytes())
    return last, read, written


def stage_time(spark: Any, after_stage: int) -> dict[str, float]:
    """Where a contender's time went on the cluster, over the stages with an id above ``after_stage``: ``busy_s``,
    the wall time during which at least one of them ran (the rest of the contender's time is the driver alone);
    ``task_run_s`` and ``task_cpu_s``, the executors' task time and CPU time summed over tasks (run time above CPU
    time is waiting: I/O, or cores taken by other threads such as the driver's)."""
    intervals: list[tuple[float, float]] = []
    run_ms = cpu_ns = 0
    for stage in stage_list(spark):
        if int(stage.stageId()) <= after_stage:
            continue
        run_ms += int(stage.executorRunTime())
        cpu_ns += int(stage.executorCpuTime())
        start, end = stage.submissionTime(), stage.completionTime()
        if start.isDefined() and end.isDefined():
            intervals.append((start.get().getTime() / 1000.0, end.get().getTime() / 1000.0))
    busy, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            busy += end - max(start, reach)
            reach = end
    return {"busy_s": round(busy, 3), "task_run_s": round(run_ms / 1000.0, 3), "task_cpu_s": round(cpu_ns / 1e9, 3)}
