"""The Spark layer's classification of a failure into the retry table's kinds (compaction.core.retry), from the
platform's error and the Java exception chain it came from (no JVM: the chain is given as class names)."""

from __future__ import annotations

from compaction.core.errors import (
    CatalogUnavailableError,
    CommitConflictError,
    CommitValidationError,
    RewriteJobError,
    StorageUnavailableError,
    UnsupportedTableError,
)
from compaction.core.retry import FailureKind
from compaction.spark.task import classify_failure, failure_kind

ICEBERG = "org.apache.iceberg.exceptions."


def _conflict(java_class: str) -> CommitConflictError:
    err = CommitConflictError("MAJOR p: conflict")
    err.java_class = java_class  # type: ignore[attr-defined]
    return err


def test_iceberg_commit_exceptions_have_their_own_kinds() -> None:
    assert failure_kind(_conflict(ICEBERG + "ValidationException")) is FailureKind.COMMIT_CONFLICT
    assert failure_kind(_conflict(ICEBERG + "CommitFailedException")) is FailureKind.COMMIT_FAILED
    # Our own conflict checks (no Java class) are conflicts.
    assert failure_kind(CommitConflictError("rewrite committed but its snapshot was not found")) \
        is FailureKind.COMMIT_CONFLICT
    unknown = [("org.apache.spark.SparkException", "job aborted"),
               (ICEBERG + "CommitStateUnknownException", "Connection reset")]
    assert failure_kind(RewriteJobError("MAJOR p: SparkException: job aborted"), unknown) \
        is FailureKind.COMMIT_STATE_UNKNOWN


def test_the_platforms_errors_map_to_their_kinds() -> None:
    assert failure_kind(CatalogUnavailableError("down")) is FailureKind.CATALOG_UNAVAILABLE
    assert failure_kind(StorageUnavailableError("503")) is FailureKind.STORAGE_UNAVAILABLE
    assert failure_kind(CommitValidationError("rows differ")) is FailureKind.VALIDATION_MISMATCH
    assert failure_kind(UnsupportedTableError("v1")) is FailureKind.UNSUPPORTED_TABLE
    assert failure_kind(RewriteJobError("executor lost"), [("org.apache.spark.SparkException", "lost")]) \
        is FailureKind.OTHER


def test_a_python_error_is_classified_as_other() -> None:
    err, kind = classify_failure(KeyError("x"), "MAJOR p")
    assert isinstance(err, RewriteJobError) and kind is FailureKind.OTHER and "KeyError" in str(err)
    same, kind = classify_failure(CommitValidationError("rows differ"), "MAJOR p")
    assert str(same) == "rows differ" and kind is FailureKind.VALIDATION_MISMATCH
