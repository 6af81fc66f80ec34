"""Data interval -> partition filter (pure): what a scheduled or backfill DAG run compacts."""

from __future__ import annotations

import datetime as _dt

import pytest

from compaction.core.errors import ConfigError
from compaction.core.intervals import (
    SpecField,
    combine_filters,
    interval_filter,
    partition_window_for,
    time_partition_field,
    window_applies,
)
from compaction.core.model import PartitionFieldValue, PartitionKey
from compaction.core.partition_filter import parse_partition_filter

UTC = _dt.timezone.utc
DAY = SpecField("ts_day", "day", "timestamptz")


def _key(name: str, transform: str, value: int | None, source: str = "ts") -> PartitionKey:
    return PartitionKey(0, (PartitionFieldValue(name, transform, source, value),))


def _days(d: _dt.date) -> int:
    return (d - _dt.date(1970, 1, 1)).days


def test_day_interval_selects_exactly_its_days() -> None:
    flt = interval_filter(DAY, _dt.datetime(2024, 1, 2, tzinfo=UTC), _dt.datetime(2024, 1, 4, tzinfo=UTC))
    assert flt.to_text() == "ts_day >= 2024-01-02 and ts_day <= 2024-01-03"
    selected = [d for d in range(_days(_dt.date(2023, 12, 30)), _days(_dt.date(2024, 1, 8)))
                if flt(_key("ts_day", "day", d))]
    assert selected == [_days(_dt.date(2024, 1, 2)), _days(_dt.date(2024, 1, 3))]
    assert not flt(_key("ts_day", "day", None))
    assert parse_partition_filter(flt.to_text()) == flt  # recorded in the plan as ordinary filter text


def test_partial_days_and_other_time_zones_are_converted_to_utc() -> None:
    cet = _dt.timezone(_dt.timedelta(hours=1))
    flt = interval_filter(DAY, _dt.datetime(2024, 1, 2, 0, 30, tzinfo=cet), _dt.datetime(2024, 1, 2, 12, tzinfo=UTC))
    assert flt.to_text() == "ts_day >= 2024-01-01 and ts_day <= 2024-01-02"


@pytest.mark.parametrize(
    ("transform", "start", "end", "first", "last"),
    [
        ("hour", _dt.datetime(1970, 1, 2, 3, tzinfo=UTC), _dt.datetime(1970, 1, 2, 5, tzinfo=UTC), 27, 28),
        ("month", _dt.datetime(2024, 1, 31, tzinfo=UTC), _dt.datetime(2024, 2, 1, tzinfo=UTC), 648, 648),
        ("month", _dt.datetime(2024, 1, 31, tzinfo=UTC), _dt.datetime(2024, 2, 1, 1, tzinfo=UTC), 648, 649),
        ("year", _dt.datetime(2023, 12, 31, tzinfo=UTC), _dt.datetime(2024, 1, 2, tzinfo=UTC), 53, 54),
    ],
)
def test_hour_month_year_use_internal_units(transform: str, start: _dt.datetime, end: _dt.datetime,
                                            first: int, last: int) -> None:
    field = SpecField(f"ts_{transform}", transform, "timestamp")
    flt = interval_filter(field, start, end)
    assert flt.to_text() == f"ts_{transform} >= {first} and ts_{transform} <= {last}"
    assert flt(_key(field.name, transform, first)) and flt(_key(field.name, transform, last))
    assert not flt(_key(field.name, transform, first - 1)) and not flt(_key(field.name, transform, last + 1))


def test_identity_date_field_is_time_but_identity_int_or_timestamp_is_not() -> None:
    event_date = SpecField("event_date", "identity", "date")
    flt = interval_filter(event_date, _dt.datetime(2024, 3, 1, tzinfo=UTC), _dt.datetime(2024, 3, 2, tzinfo=UTC))
    assert flt(_key("event_date", "identity", _days(_dt.date(2024, 3, 1)), "event_date"))
    assert not flt(_key("event_date", "identity", _days(_dt.date(2024, 3, 2)), "event_date"))
    fields = [SpecField("n", "identity", "int"), SpecField("b", "bucket[8]", "long"),
              SpecField("t", "identity", "timestamptz"), event_date, DAY]
    assert time_partition_field(fields) == event_date
    assert time_partition_field(fields[:3]) is None
    assert time_partition_field([SpecField("region_day", "day", "string")]) is None


def test_bad_intervals_and_fields_are_config_errors() -> None:
    start = _dt.datetime(2024, 1, 2, tzinfo=UTC)
    with pytest.raises(ConfigError, match="empty data interval"):
        interval_filter(DAY, start, start)
    with pytest.raises(ConfigError, match="timezone-aware"):
        interval_filter(DAY, _dt.datetime(2024, 1, 1), start)
    with pytest.raises(ConfigError, match="not a time field"):
        interval_filter(SpecField("region", "identity", "string"), start, start + _dt.timedelta(days=1))
    with pytest.raises(ConfigError, match="cannot build a partition filter"):
        interval_filter(SpecField("and", "day", "date"), start, start + _dt.timedelta(days=1))


def test_window_choice_by_run_type() -> None:
    assert window_applies("auto", "backfill") and window_applies("auto", "scheduled")
    assert not window_applies("auto", "manual") and not window_applies("auto", "asset_triggered")
    assert window_applies("data_interval", "manual") and not window_applies("all", "backfill")
    with pytest.raises(ConfigError, match="invalid window 'sometimes'"):
        window_applies("sometimes", "manual")


def test_partition_window_for_a_table() -> None:
    start, end = _dt.datetime(2024, 1, 2, tzinfo=UTC), _dt.datetime(2024, 1, 3, tzinfo=UTC)
    assert partition_window_for([DAY], "auto", "manual", start, end) is None
    assert partition_window_for([SpecField("region", "identity", "string")], "auto", "backfill", start, end) is None
    flt = partition_window_for([DAY], "auto", "backfill", start, end)
    assert flt is not None and flt.to_text() == "ts_day >= 2024-01-02 and ts_day <= 2024-01-02"
    with pytest.raises(ConfigError, match="no data interval"):
        partition_window_for([DAY], "data_interval", "manual", None, None)


def test_combine_with_a_user_filter() -> None:
    user = parse_partition_filter("region = 'EU'")
    window = interval_filter(DAY, _dt.datetime(2024, 1, 2, tzinfo=UTC), _dt.datetime(2024, 1, 3, tzinfo=UTC))
    both = combine_filters(user, None, window)
    assert both is not None
    assert both.to_text() == "region = 'EU' and ts_day >= 2024-01-02 and ts_day <= 2024-01-02"
    assert combine_filters(None, None) is None
