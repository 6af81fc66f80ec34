"""The options of a compaction run, defined once: ``icecompact run``'s arguments, the DAGs' params, the Spark job's
arguments and the work queue all read these names, choices, defaults and limits."""

from __future__ import annotations

from compaction.core.errors import ConfigError

#: Post-commit validation of every compaction snapshot (docs/validation.md): ``none``, ``count`` (row counts per
#: partition) or ``checksum`` (counts and an order-independent hash of every row).
VALIDATION_LEVELS = ("none", "count", "checksum")
VALIDATION_DEFAULT = "count"
#: The level a post-hoc check uses when the run's own level checked nothing: a snapshot nobody checked gets a count.
POSTHOC_VALIDATION_FLOOR = "count"
#: Commit-conflict retries per partition.
MAX_RETRIES_DEFAULT = 3
MAX_RETRIES_LIMIT = 20
#: Concurrent Spark jobs of one run (always 1 on a SQLite catalog: one writer at a time).
MAX_PARALLEL_JOBS_DEFAULT = 2
MAX_PARALLEL_JOBS_LIMIT = 64


def check_validation_level(level: str) -> str:
    if level not in VALIDATION_LEVELS:
        raise ConfigError(f"invalid validation level {level!r}: use one of {', '.join(VALIDATION_LEVELS)}")
    return level


def posthoc_level(level: str) -> str:
    """The level of a post-hoc check for a run validated at ``level``: at least a count."""
    return level if level in VALIDATION_LEVELS and level != "none" else POSTHOC_VALIDATION_FLOOR
