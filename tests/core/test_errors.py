"""The exception root: every platform error has its own exit code, listed in docs/operations.md."""

from __future__ import annotations

import re
from pathlib import Path

from compaction.core import errors
from compaction.core.errors import CompactionError, MaintenanceError
from compaction.ledger.errors import LedgerError


def _codes() -> dict[int, str]:
    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, CompactionError)]
    return {c.exit_code: c.__name__ for c in classes + [LedgerError] if c.exit_code != 1}


def test_maintenance_error_lives_with_the_others_and_spark_reexports_it() -> None:
    from compaction.spark import maintenance as spark_maintenance

    assert MaintenanceError.exit_code == 11 and not MaintenanceError.retryable
    assert spark_maintenance.MaintenanceError is MaintenanceError
    assert issubclass(spark_maintenance.OrphanSafetyError, MaintenanceError)


def test_every_exit_code_is_documented() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    line = re.search(r"Exit codes: (.*?)\.\n", text, re.S)
    assert line is not None
    documented = {int(n) for n in re.findall(r"\b(\d+) [a-z]", line.group(1))}
    assert set(_codes()) <= documented, (_codes(), documented)
