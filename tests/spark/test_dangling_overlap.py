"""A MAJOR searches for the delete files its rewrite leaves dangling from the planned files while the rewrite runs;
that early answer is used only when the rewrite replaced exactly the planned files (no JVM: futures stand in)."""

from __future__ import annotations

import concurrent.futures
from typing import Any

from compaction.spark.major import _early_result


def _done(value: Any = None, error: BaseException | None = None) -> concurrent.futures.Future[Any]:
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
    return future


def test_the_early_search_counts_when_the_rewrite_replaced_the_planned_files() -> None:
    planned = frozenset({"a.parquet", "b.parquet"})
    assert _early_result([_done((planned, ["dangling"]))], frozenset({"b.parquet", "a.parquet"})) == ["dangling"]


def test_other_files_replaced_mean_searching_again() -> None:
    planned = frozenset({"a.parquet", "b.parquet"})
    assert _early_result([_done((planned, ["dangling"]))], frozenset({"a.parquet"})) is None
    assert _early_result([_done((planned, []))], planned | {"c.parquet"}) is None


def test_no_early_search_or_a_failed_one_means_searching_again() -> None:
    assert _early_result([], frozenset({"a.parquet"})) is None
    assert _early_result([_done(error=RuntimeError("py4j down"))], frozenset({"a.parquet"})) is None
