"""Engine-agnostic core of the compaction platform (stdlib only).

* :mod:`compaction.core.errors` - the exception hierarchy (``CompactionError`` and subclasses).
* :mod:`compaction.core.model` - immutable value objects describing a table's state.
* :mod:`compaction.core.policy` - ``CompactionPolicy`` and its ``compaction.*`` table-property keys.
* :mod:`compaction.core.planner` - per-partition decisions (:mod:`compaction.core.grouping` packs the decided
  partitions into job groups).
* :mod:`compaction.core.applicability` - which delete file applies to which data file (the spec's Scan Planning
  rule), and what a MINOR replaces: shared by the planner and the Spark MINOR.
* :mod:`compaction.core.results` - partition and group results, their statuses, the versioned result JSON.
* :mod:`compaction.core.redaction`, :mod:`compaction.core.display`, :mod:`compaction.core.run_options` - secret
  masking, how values are shown, the run options and their defaults: one home each.
* :mod:`compaction.core.plan` - the versioned, JSON round-trippable ``CompactionPlan``.
* :mod:`compaction.core.partition_filter` - partition filters in projected form (parsed and projected by
  :mod:`compaction.metadata.filters`).
* :mod:`compaction.core.intervals` - data intervals of DAG runs as row filters on the time column.
"""

from __future__ import annotations

from compaction.core.errors import (
    CatalogError,
    CommitConflictError,
    CommitValidationError,
    CompactionError,
    ConfigError,
    PlanningError,
    RewriteJobError,
    StalePlanError,
    UnsupportedTableError,
)
from compaction.core.model import (
    DataFileInfo,
    DeleteContent,
    DeleteFileInfo,
    PartitionFieldValue,
    PartitionKey,
    PartitionScalar,
    PartitionState,
    TableIdentity,
    TableState,
)
from compaction.core.partition_filter import PartitionFilter, PartitionPredicate, SpecProjection
from compaction.core.plan import (
    PLAN_FORMAT_VERSION,
    CompactionKind,
    CompactionMode,
    CompactionPlan,
    CompactionTask,
    DeferredPartition,
    JobGroup,
    PartitionDecision,
)
from compaction.core.planner import TaskPlan, evaluate_partition, plan, plan_tasks
from compaction.core.policy import CompactionPolicy

__all__ = [
    "CatalogError",
    "CommitConflictError",
    "CommitValidationError",
    "CompactionError",
    "CompactionKind",
    "CompactionMode",
    "CompactionPlan",
    "CompactionPolicy",
    "CompactionTask",
    "ConfigError",
    "DataFileInfo",
    "DeferredPartition",
    "DeleteContent",
    "DeleteFileInfo",
    "JobGroup",
    "PLAN_FORMAT_VERSION",
    "PartitionDecision",
    "PartitionFieldValue",
    "PartitionFilter",
    "PartitionPredicate",
    "PartitionKey",
    "PartitionScalar",
    "PartitionState",
    "PlanningError",
    "SpecProjection",
    "RewriteJobError",
    "StalePlanError",
    "TableIdentity",
    "TableState",
    "TaskPlan",
    "UnsupportedTableError",
    "evaluate_partition",
    "plan",
    "plan_tasks",
]
