from __future__ import annotations

import pytest

from compaction.core.errors import ConfigError
from compaction.core.run_options import VALIDATION_DEFAULT, VALIDATION_LEVELS, check_validation_level, posthoc_level


def test_validation_levels() -> None:
    assert VALIDATION_DEFAULT in VALIDATION_LEVELS
    assert check_validation_level("checksum") == "checksum"
    with pytest.raises(ConfigError, match="none, count, checksum"):
        check_validation_level("full")


def test_a_posthoc_check_counts_at_least() -> None:
    assert posthoc_level("none") == "count"
    assert posthoc_level("count") == "count"
    assert posthoc_level("checksum") == "checksum"
    assert posthoc_level("bogus") == "count"


def test_the_spark_jobs_levels_are_the_same() -> None:
    from compaction.spark.validation import ValidationLevel

    assert tuple(level.value for level in ValidationLevel) == VALIDATION_LEVELS
