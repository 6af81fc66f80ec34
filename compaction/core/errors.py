"""One exception root for the whole platform.

Every error a user can see is a :class:`CompactionError` subclass with an ``exit_code`` (the CLI and the
spark-submit entry point exit with it) and a ``retryable`` flag (the orchestrator re-plans and retries only
retryable failures). Third-party errors are wrapped where they enter (``raise CatalogError(...) from e``).
"""

from __future__ import annotations


class CompactionError(Exception):
    """Root of every error raised by the compaction platform."""

    exit_code: int = 1
    retryable: bool = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ConfigError(CompactionError):
    """A configuration value (catalog property, policy key, run parameter) is missing or invalid; also a partition
    filter that is malformed, names an unknown column or has a literal of the wrong type (see compaction.metadata.filters)."""

    exit_code = 2


class CatalogError(CompactionError):
    """The catalog cannot be reached, or the namespace/table does not exist."""

    exit_code = 3


class CatalogUnavailableError(CatalogError):
    """The catalog's service or database did not answer (connection refused or lost): transient, e.g. a database
    restart or failover. Work that has committed nothing is retried once it answers again."""


class PlanningError(CompactionError):
    """The planner cannot produce a plan (a partition filter that can never narrow the table's partitions, an
    inconsistent state)."""

    exit_code = 4


class UnsupportedTableError(CompactionError):
    """The table cannot be compacted by this platform (format v1, unsupported delete layout, ...)."""

    exit_code = 5


class StalePlanError(CompactionError):
    """The table changed since the plan was made in a way that invalidates it; re-plan and retry."""

    exit_code = 6
    retryable = True


class CommitConflictError(CompactionError):
    """A concurrent writer conflicted with our commit (Iceberg ValidationException or our own checks)."""

    exit_code = 7
    retryable = True


class RewriteJobError(CompactionError):
    """The Spark job failed before committing (JVM crash, executor loss, killed process)."""

    exit_code = 8


class CommitValidationError(CompactionError):
    """The post-commit invariant check found a difference between the compaction snapshot and its parent."""

    exit_code = 9


class MaintenanceError(CompactionError):
    """A maintenance action (snapshot expiry, manifest rewrite, orphan removal) failed or was refused; nothing of
    that action was committed or deleted. Not retryable as such: the next scheduled run plans afresh."""

    exit_code = 11


class StorageUnavailableError(CompactionError):
    """The object store (or file system) answered a metadata read with a transient error - S3's 500 InternalError /
    503 SlowDown, a reset connection, a timeout - on every attempt. Nothing was changed; run again."""

    exit_code = 12
    retryable = True


class YieldedToWritersError(CompactionError):
    """A compaction commit waited ``compaction.yield.max-wait`` for the table's write leases and gave up
    (``compaction.yield.on-timeout=skip``): nothing of it was committed; the next run plans it again."""

    exit_code = 13
    retryable = True
