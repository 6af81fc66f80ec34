"""Data intervals -> partition filters: what a scheduled or backfill run of the DAG compacts.

A run of the Airflow DAG covers a data interval ``[start, end)``. For a *time-partitioned* table (its default spec
has a ``year``/``month``/``day``/``hour`` transform of a ``date``/``timestamp`` column, or an ``identity`` field on a
``date`` column) the run compacts only the partitions whose time range overlaps that interval, so
``airflow backfill create --from-date A --to-date B`` compacts exactly the partitions of those days.

Partition values are in Iceberg's internal representation (see :mod:`compaction.core.model`): ``day`` and
identity ``date`` -> days since 1970-01-01, ``hour`` -> hours since the epoch, ``month`` -> months since 1970-01,
``year`` -> years since 1970. The interval is converted to UTC; for a ``timestamp`` (without zone) column the UTC
wall clock is used, as Spark does with ``spark.sql.session.timeZone=UTC``.

The result is a :class:`~compaction.core.partition_filter.PartitionFilter` built from typed conditions (never
from text), so it is recorded in the plan like a user's filter and combines with one by conjunction. Only the
first time field of the default spec is used; partitions of older specs that lack that field do not match.

Pure: stdlib only, no clock, no I/O.
"""

from __future__ import annotations

import datetime as _dt
import enum
from dataclasses import dataclass
from typing import Sequence

from compaction.core.errors import ConfigError
from compaction.core.partition_filter import FilterCondition, FilterLiteral, PartitionFilter

__all__ = [
    "SpecField",
    "TimeWindow",
    "TIME_TRANSFORMS",
    "TIME_SOURCE_TYPES",
    "time_partition_field",
    "interval_filter",
    "combine_filters",
    "window_applies",
    "partition_window_for",
]

TIME_TRANSFORMS: tuple[str, ...] = ("year", "month", "day", "hour")
TIME_SOURCE_TYPES: frozenset[str] = frozenset({"date", "timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"})
_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
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
    """One partition field of a spec: its name, transform (``day``, ``identity``, ``bucket[8]``, ...) and the type
    of its source column (``date``, ``timestamptz``, ``string``, ...), as pyiceberg prints them."""

    name: str
    transform: str
    source_type: str

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


def _unit(transform: str, instant: _dt.datetime) -> int:
    """The internal partition value of the partition that holds ``instant`` (UTC)."""
    if transform in ("day", "identity"):
        return (instant.date() - _EPOCH_DATE).days
    if transform == "hour":
        return (instant - _EPOCH) // _dt.timedelta(hours=1)
    if transform == "month":
        return (instant.year - 1970) * 12 + instant.month - 1
    if transform == "year":
        return instant.year - 1970
    raise ConfigError(f"transform {transform!r} is not a time transform")


def _literal(transform: str, value: int) -> FilterLiteral:
    if transform in ("day", "identity"):  # a date literal compares as days with day / identity-date fields
        return FilterLiteral("date", (_EPOCH_DATE + _dt.timedelta(days=value)).isoformat())
    return FilterLiteral("int", str(value))


def interval_filter(field: SpecField, start: _dt.datetime, end: _dt.datetime) -> PartitionFilter:
    """Partitions of ``field`` whose time range overlaps ``[start, end)``: ``field >= first and field <= last``.

    Raises :class:`ConfigError` for a naive datetime, an empty or inverted interval, or a non-time field.
    """
    if not field.is_time:
        raise ConfigError(f"partition field {field.name!r} ({field.transform} of {field.source_type}) is not a time field")
    lo, hi = _utc(start, "data interval start"), _utc(end, "data interval end")
    if hi <= lo:
        raise ConfigError(
            f"empty data interval [{lo.isoformat()}, {hi.isoformat()}): a run restricted to its data interval needs an "
            f"interval timetable (the DAG's schedule) or a window of 'all'"
        )
    first, last = _unit(field.transform, lo), _unit(field.transform, hi - _ONE_MICROSECOND)
    try:
        conditions = (
            FilterCondition(field.name, ">=", (_literal(field.transform, first),)),
            FilterCondition(field.name, "<=", (_literal(field.transform, last),)),
        )
        return PartitionFilter.from_dict({"conditions": [c.to_dict() for c in conditions]})  # validates the name
    except ConfigError:
        raise
    except Exception as e:  # PlanningError for a field name the filter language cannot hold
        raise ConfigError(f"cannot build a partition filter on field {field.name!r}: {e}") from e


def combine_filters(*filters: PartitionFilter | None) -> PartitionFilter | None:
    """Conjunction of the given filters (``None`` entries ignored); ``None`` when all are ``None``."""
    conditions = tuple(c for f in filters if f is not None for c in f.conditions)
    return PartitionFilter(conditions) if conditions else None


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
) -> PartitionFilter | None:
    """The data-interval filter for one table, or ``None`` when the run is not restricted (window, run type) or
    the table is not time-partitioned. A restricted run without a data interval is a :class:`ConfigError`."""
    if not window_applies(window, run_type):
        return None
    field = time_partition_field(fields)
    if field is None:
        return None
    if start is None or end is None:
        raise ConfigError("this run has no data interval: trigger it with a logical date or use window 'all'")
    return interval_filter(field, start, end)
