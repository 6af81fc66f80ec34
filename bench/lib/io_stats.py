"""Bytes read and written by Spark tasks, from Spark's status store: what a contender or a query made Spark read."""

from __future__ import annotations

from typing import Any


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
