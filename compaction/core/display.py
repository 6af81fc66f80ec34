"""How values are shown to people, one wording everywhere: the CLI's tables, the Spark job's progress lines, the
run's log and the Airflow UI."""

from __future__ import annotations

_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def format_bytes(n: float) -> str:
    """``512 B``, ``1.5 KiB``, ``3.2 GiB`` (binary units, one decimal above bytes)."""
    value = float(n)
    for unit in _BYTE_UNITS:
        if abs(value) < 1024 or unit == _BYTE_UNITS[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable: the last unit always returns")


def validation_label(level: str | None, result: str | None) -> str:
    """How a partition's validation is shown: ``passed (count)``, ``failed (checksum)``, ``skipped (none)``; ``-``
    when nothing was checked. A partition touched by several commits (a file rewrite, its cleanup, a conversion) shows
    the weakest result among them: every one was checked at the run's level, and one failure is the partition's
    failure."""
    if not result:
        return "-"
    return f"{result} ({level})" if level else str(result)
