"""Data interval -> row filter on the time column (pure): what a scheduled or backfill DAG run compacts.

Which partitions such a filter selects (day/hour/month/year and identity-date fields, every spec) is tested where it
is projected, in tests/test_filters.py."""

from __future__ import annotations

import datetime as _dt

import pytest

from compaction.core.errors import ConfigError
from compaction.core.intervals import (
    IntervalFilter,
    RowCondition,
    SpecField,
    interval_filter,
    partition_window_for,
    quote_column,
    time_partition_field,
    window_applies,
)

UTC = _dt.timezone.utc
DAY = SpecField("ts_day", "day", "timestamptz", "ts")


def test_timestamptz_interval_is_a_half_open_utc_range() -> None:
    flt = interval_filter(DAY, _dt.datetime(2024, 1, 2, tzinfo=UTC), _dt.datetime(2024, 1, 4, tzinfo=UTC))
    assert flt == IntervalFilter((RowCondition("ts", ">=", "2024-01-02T00:00:00+00:00"),
                                  RowCondition("ts", "<", "2024-01-04T00:00:00+00:00")))
    assert flt.to_text() == "ts >= '2024-01-02T00:00:00+00:00' and ts < '2024-01-04T00:00:00+00:00'"


def test_other_time_zones_are_converted_to_utc() -> None:
    cet = _dt.timezone(_dt.timedelta(hours=1))
    flt = interval_filter(DAY, _dt.datetime(2024, 1, 2, 0, 30, tzinfo=cet), _dt.datetime(2024, 1, 2, 12, tzinfo=UTC))
    assert flt.to_text() == "ts >= '2024-01-01T23:30:00+00:00' and ts < '2024-01-02T12:00:00+00:00'"


def test_timestamp_without_zone_uses_the_utc_wall_clock_and_dates_are_inclusive() -> None:
    hour = SpecField("ts_hour", "hour", "timestamp", "ts")
    cet = _dt.timezone(_dt.timedelta(hours=1))
    flt = interval_filter(hour, _dt.datetime(1970, 1, 2, 4, tzinfo=cet), _dt.datetime(1970, 1, 2, 5, tzinfo=UTC))
    assert flt.to_text() == "ts >= '1970-01-02T03:00:00' and ts < '1970-01-02T05:00:00'"
    event_date = SpecField("event_date", "identity", "date", "event_date")
    flt = interval_filter(event_date, _dt.datetime(2024, 3, 1, 12, tzinfo=UTC), _dt.datetime(2024, 3, 3, tzinfo=UTC))
    assert flt.to_text() == "event_date >= '2024-03-01' and event_date <= '2024-03-02'"


def test_identity_date_field_is_time_but_identity_int_or_timestamp_is_not() -> None:
    event_date = SpecField("event_date", "identity", "date", "event_date")
    fields = [SpecField("n", "identity", "int", "n"), SpecField("b", "bucket[8]", "long", "b"),
              SpecField("t", "identity", "timestamptz", "t"), event_date, DAY]
    assert time_partition_field(fields) == event_date
    assert time_partition_field(fields[:3]) is None
    assert time_partition_field([SpecField("region_day", "day", "string", "region")]) is None


def test_bad_intervals_and_fields_are_config_errors() -> None:
    start = _dt.datetime(2024, 1, 2, tzinfo=UTC)
    with pytest.raises(ConfigError, match="empty data interval"):
        interval_filter(DAY, start, start)
    with pytest.raises(ConfigError, match="timezone-aware"):
        interval_filter(DAY, _dt.datetime(2024, 1, 1), start)
    with pytest.raises(ConfigError, match="not a time field"):
        interval_filter(SpecField("region", "identity", "string", "region"), start, start + _dt.timedelta(days=1))
    with pytest.raises(ConfigError, match="no source column"):
        interval_filter(SpecField("ts_day", "day", "date"), start, start + _dt.timedelta(days=1))


def test_column_names_are_quoted_when_the_parser_needs_it() -> None:
    assert quote_column("ts") == "ts" and quote_column("event.ts") == "event.ts"
    assert quote_column("and") == '"and"' and quote_column("my col") == '"my col"' and quote_column("1x") == '"1x"'


def test_window_choice_by_run_type() -> None:
    assert window_applies("auto", "backfill") and window_applies("auto", "scheduled")
    assert not window_applies("auto", "manual") and not window_applies("auto", "asset_triggered")
    assert window_applies("data_interval", "manual") and not window_applies("all", "backfill")
    with pytest.raises(ConfigError, match="invalid window 'sometimes'"):
        window_applies("sometimes", "manual")


def test_partition_window_for_a_table() -> None:
    start, end = _dt.datetime(2024, 1, 2, tzinfo=UTC), _dt.datetime(2024, 1, 3, tzinfo=UTC)
    assert partition_window_for([DAY], "auto", "manual", start, end) is None
    assert partition_window_for([SpecField("region", "identity", "string", "region")], "auto", "backfill",
                                start, end) is None
    flt = partition_window_for([DAY], "auto", "backfill", start, end)
    assert flt is not None and flt.to_text() == "ts >= '2024-01-02T00:00:00+00:00' and ts < '2024-01-03T00:00:00+00:00'"
    with pytest.raises(ConfigError, match="no data interval"):
        partition_window_for([DAY], "data_interval", "manual", None, None)
