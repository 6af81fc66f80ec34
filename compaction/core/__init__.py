"""Engine-agnostic core of the compaction platform (stdlib only).

* :mod:`compaction.core.errors` - the exception hierarchy (``CompactionError`` and subclasses).
* :mod:`compaction.core.model` - immutable value objects describing a table's state.
* :mod:`compaction.core.policy` - ``CompactionPolicy`` and its ``compaction.*`` table-property keys.
* :mod:`compaction.core.planner` - per-partition decisions and cost-balanced task planning.
* :mod:`compaction.core.plan` - the versioned, JSON round-trippable ``CompactionPlan``.
* :mod:`compaction.core.partition_filter` - the safe partition-filter language.
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
from compaction.core.partition_filter import FilterCondition, FilterLiteral, PartitionFilter, parse_partition_filter
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
    "FilterCondition",
    "FilterLiteral",
    "JobGroup",
    "PLAN_FORMAT_VERSION",
    "PartitionDecision",
    "PartitionFieldValue",
    "PartitionFilter",
    "PartitionKey",
    "PartitionScalar",
    "PartitionState",
    "PlanningError",
    "RewriteJobError",
    "StalePlanError",
    "TableIdentity",
    "TableState",
    "TaskPlan",
    "UnsupportedTableError",
    "evaluate_partition",
    "parse_partition_filter",
    "plan",
    "plan_tasks",
]
