"""Compaction of one table in the calling process: inspect, plan, and every job group run in the given Spark session.

The way tests and benchmarks run the whole path without spark-submit, the resident executor or the ledger."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from compaction.catalog import CatalogConfig
from compaction.core.plan import CompactionMode, CompactionPlan
from compaction.core.planner import plan
from compaction.core.policy import CompactionPolicy
from compaction.metadata.inspect import inspect_table
from compaction.core.results import COMMITTED, NO_OP, SKIPPED, GroupResult, PartitionResult
from compaction.core.yielding import CommitGate
from compaction.spark.gate import gated
from compaction.spark.job import MAX_RETRIES_DEFAULT, run_group
from compaction.spark.validation import ValidationLevel

__all__ = ["FINISHED", "InProcessRun", "compact_in_process"]

#: A partition's outcome that is not a failure.
FINISHED = (COMMITTED, NO_OP, SKIPPED)
#: Planning time of :func:`compact_in_process` unless given: fixed, so plans do not depend on the clock.
DEFAULT_NOW = _dt.datetime(2026, 1, 1, tzinfo=_dt.timezone.utc)


@dataclass(frozen=True)
class InProcessRun:
    plan: CompactionPlan
    groups: tuple[GroupResult, ...]

    @property
    def partitions(self) -> list[PartitionResult]:
        return [p for g in self.groups for p in g.partitions]

    def assert_finished(self) -> None:
        """Every partition finished without failure (nothing need be planned or committed)."""
        outcomes = self.partitions
        assert all(p.status in FINISHED for p in outcomes), \
            "\n".join(f"{p.label} {p.kind} {p.status}: {p.error}" for p in outcomes)

    def assert_clean(self) -> None:
        """Something was planned, every partition finished without failure, and at least one committed."""
        assert self.plan.groups, f"nothing planned for {self.plan.mode.value} on {self.plan.table.dotted}"
        self.assert_finished()
        assert any(p.status == COMMITTED for p in self.partitions), f"{self.plan.mode.value}: nothing committed"


def compact_in_process(spark: Any, catalog: CatalogConfig, table_name: str, mode: CompactionMode | str, *,
                       level: ValidationLevel = ValidationLevel.COUNT,
                       overrides: Mapping[str, Any] | None = None,
                       now: _dt.datetime | None = None,
                       max_retries: int = MAX_RETRIES_DEFAULT,
                       clean: bool = False,
                       gate: CommitGate | None = None,
                       progress: Callable[[str], None] | None = None) -> InProcessRun:
    """Plan ``mode`` on ``table_name`` (policy from its properties and ``overrides``) and run every job group in
    ``spark``. ``clean``: assert :meth:`InProcessRun.assert_clean`; ``gate``: every commit passes it (as in the
    resident executor, compaction.ledger.writers.LedgerCommitGate)."""
    state = inspect_table(catalog, table_name)
    the_plan = plan(state, CompactionPolicy.resolve(state.properties, dict(overrides) if overrides else None), mode,
                    now or DEFAULT_NOW)
    with gated(gate, the_plan, progress):
        run = InProcessRun(the_plan, tuple(run_group(spark, the_plan, g.group_id, level=level, max_retries=max_retries,
                                                     progress=progress)
                                           for g in the_plan.groups))
    if clean:
        run.assert_clean()
    return run
