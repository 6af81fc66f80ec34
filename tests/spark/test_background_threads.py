"""Driver-side background threads (jvm.in_background, jvm.SparkThreadPool) run with the submitting thread's Spark
local properties (job group, scheduler pool: a Spark job started there is accounted to the caller's pool), on both
Spark lines, and without PySpark's warning that no session was given to inherit from."""

from __future__ import annotations

import warnings

PROPERTY = "icecompact.test.caller"


def test_background_threads_keep_the_callers_properties(spark) -> None:  # type: ignore[no-untyped-def]
    from compaction.spark import jvm as J

    context = spark.sparkContext
    context.setLocalProperty(PROPERTY, "caller-a")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # PySpark 4: "Spark session is not provided. Tags will not be inherited."
            seen = J.in_background(spark, lambda: context.getLocalProperty(PROPERTY)).result(timeout=60)
            pool = J.SparkThreadPool(spark, workers=2, name="test-pool")
            try:
                pooled = [pool.submit(lambda _: context.getLocalProperty(PROPERTY), i) for i in range(3)]
                context.setLocalProperty(PROPERTY, "caller-b")  # taken when submitted, not when run
                late = pool.submit(lambda _: context.getLocalProperty(PROPERTY), 3)
                values = [f.result(timeout=60) for f in pooled] + [late.result(timeout=60)]
            finally:
                pool.close()
        assert seen == "caller-a"
        assert values == ["caller-a", "caller-a", "caller-a", "caller-b"]
    finally:
        context.setLocalProperty(PROPERTY, None)  # type: ignore[arg-type]
