"""Data intervals -> row filters on the time column: what a scheduled or backfill run of the DAG compacts.

A run of the Airflow DAG covers a data interval ``[start, end)``. For a *time-partitioned* table (its default spec
has a ``year``/``month``/``day``/``hour`` transform of a ``date``/``timestamp`` column, or an ``identity`` field on a
``date`` column) the run compacts only the partitions that can hold rows of that interval, so
``airflow backfill create --from-date A --to-date B`` compacts exactly the partitions of those days.

The interval becomes a row filter on the *source* column of that field (:class:`IntervalFilter`, e.g.
``ts >= '2024-01-02T00:00:00+00:00' and ts < '2024-01-03T00:00:00+00:00'``), which goes through the same machinery
as a user's ``partition_filter`` (:mod:`compaction.metadata.filters`: bound to the schema, projected inclusively onto every
partition spec, combined with the user's filter by ``and``, recorded in its normalised bound form). Literals: a
``timestamptz`` column gets UTC instants with ``+00:00``; a ``timestamp`` (without zone) column the UTC wall clock,
as Spark writes it with ``spark.sql.session.timeZone=UTC``; a ``date`` column the first and last UTC dates of the
interval (``d >= first and d <= last``).

Pure: stdlib only, no clock, no I/O.
"""

from __future__ import annotations

import datetime as _dt
import enum
from dataclasses import dataclass
from typing import Sequence

from compaction.core.errors import ConfigError

__all__ = [
    "SpecField",
    "RowCondition",
    "IntervalFilter",
    "TimeWindow",
    "TIME_TRANSFORMS",
    "TIME_SOURCE_TYPES",
    "time_partition_field",
    "interval_filter",
    "window_applies",
    "partition_window_for",
]

TIME_TRANSFORMS: tuple[str, ...] = ("year", "month", "day", "hour")
TIME_SOURCE_TYPES: frozenset[str] = frozenset({"date", "timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"})
_ONE_MICROSECOND = _dt.timedelta(microseconds=1)


class TimeWindow(str, enum.Enum):
    """Which partitions a DAG run compacts: ``auto`` (its data interval for scheduled and backfill runs, every
    partition for manual runs), ``data_interval`` (always its data interval), ``all`` (never restricted)."""

    AUTO = "auto"
    DATA_INTERVAL = "data_interval"
    ALL = "all"


#: Airflow run types whose data interval selects partitions under ``TimeWindow.AUTO``.
INTERVAL_RUN_TYPES: frozenset[str] = frozenset({"scheduled", "backfill"})


@dataclass(frozen=True)
class SpecField:
    """One partition field of a spec: its name, transform (``day``, ``identity``, ``bucket[8]``, ...), the type
    of its source column (``date``, ``timestamptz``, ``string``, ...), as pyiceberg prints them, and the source
    column's (dotted) name."""

    name: str
    transform: str
    source_type: str
    source_column: str = ""

    @property
    def is_time(self) -> bool:
        source = self.source_type.lower()
        if self.transform in TIME_TRANSFORMS:
            return source in TIME_SOURCE_TYPES
        return self.transform == "identity" and source == "date"


def time_partition_field(fields: Sequence[SpecField]) -> SpecField | None:
    """The first time field of a spec (in spec order), or ``None`` when the spec is not time-partitioned."""
    for f in fields:
        if f.is_time:
            return f
    return None


def _utc(value: _dt.datetime, what: str) -> _dt.datetime:
    if not isinstance(value, _dt.datetime):
        raise ConfigError(f"invalid {what} {value!r}: expected a datetime")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ConfigError(f"invalid {what} {value.isoformat()}: must be timezone-aware")
    return value.astimezone(_dt.timezone.utc)


@dataclass(frozen=True)
class RowCondition:
    """``column op 'literal'`` on a source column; ``literal`` is ISO text of the column's type."""

    column: str
    op: str  # ">=", "<", "<="
    literal: str

    def to_text(self) -> str:
        return f"{quote_column(self.column)} {self.op} '{self.literal}'"


@dataclass(frozen=True)
class IntervalFilter:
    """A data interval as a conjunction of :class:`RowCondition` on the time column."""

    conditions: tuple[RowCondition, ...]

    def to_text(self) -> str:
        return " and ".join(c.to_text() for c in self.conditions)

    def __str__(self) -> str:
        return self.to_text()


_BARE_NAME = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$")
_RESERVED = frozenset({"and", "or", "not", "is", "in", "null", "nan", "like", "between", "true", "false"})


def quote_column(name: str) -> str:
    """A (dotted) column name as Iceberg's row-filter parser reads it: each part bare, or in double quotes."""
    parts = []
    for part in name.split("."):
        bare = bool(part) and set(part) <= _BARE_NAME and not part[0].isdigit() and part[0] != "$"
        parts.append(part if bare and part.lower() not in _RESERVED else '"' + part.replace('"', '\\"') + '"')
    return ".".join(parts)


def interval_filter(field: SpecField, start: _dt.datetime, end: _dt.datetime) -> IntervalFilter:
    """Rows of ``field``'s source column inside ``[start, end)`` (see the module docstring for the literals).

    Raises :class:`ConfigError` for a naive datetime, an empty or inverted interval, or a non-time field.
    """
    if not field.is_time:
        raise ConfigError(f"partition field {field.name!r} ({field.transform} of {field.source_type}) is not a time field")
    if not field.source_column:
        raise ConfigError(f"partition field {field.name!r} has no source column in the current schema")
    lo, hi = _utc(start, "data interval start"), _utc(end, "data interval end")
    if hi <= lo:
        raise ConfigError(
            f"empty data interval [{lo.isoformat()}, {hi.isoformat()}): a run restricted to its data interval needs an "
            f"interval timetable (the DAG's schedule) or a window of 'all'"
        )
    column, source = field.source_column, field.source_type.lower()
    if source == "date":
        first, last = lo.date(), (hi - _ONE_MICROSECOND).date()
        return IntervalFilter((RowCondition(column, ">=", first.isoformat()), RowCondition(column, "<=", last.isoformat())))
    if source.startswith("timestamptz"):
        lower, upper = lo.isoformat(), hi.isoformat()
    else:  # timestamp without zone: the UTC wall clock
        lower, upper = lo.replace(tzinfo=None).isoformat(), hi.replace(tzinfo=None).isoformat()
    return IntervalFilter((RowCondition(column, ">=", lower), RowCondition(column, "<", upper)))


def window_applies(window: TimeWindow | str, run_type: str) -> bool:
    """Whether a run of ``run_type`` (Airflow's ``manual``, ``scheduled``, ``backfill``, ...) is restricted to its
    data interval under ``window``."""
    try:
        chosen = TimeWindow(window)
    except ValueError:
        allowed = ", ".join(w.value for w in TimeWindow)
        raise ConfigError(f"invalid window {window!r}: expected one of {allowed}") from None
    if chosen is TimeWindow.ALL:
        return False
    if chosen is TimeWindow.DATA_INTERVAL:
        return True
    return str(run_type).lower() in INTERVAL_RUN_TYPES


def partition_window_for(
    fields: Sequence[SpecField],
    window: TimeWindow | str,
    run_type: str,
    start: _dt.datetime | None,
    end: _dt.datetime | None,
) -> IntervalFilter | None:
    """The data-interval row filter for one table, or ``None`` when the run is not restricted (window, run type) or
    the table is not time-partitioned. A restricted run without a data interval is a :class:`ConfigError`."""
    if not window_applies(window, run_type):
        return None
    field = time_partition_field(fields)
    if field is None:
        return None
    if start is None or end is None:
        raise ConfigError("this run has no data interval: trigger it with a logical date or use window 'all'")
    return interval_filter(field, start, end)
