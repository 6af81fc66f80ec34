"""Row filters on source columns -> projected partition filters (compaction.metadata.filters, pyiceberg; no Spark).

Bad input fails with exit code 2 (configuration) or 4 (planning) and a message, before anything is inspected or
recorded. The equivalence with Iceberg's own scan planning is tests/spark/test_filter_property.py."""

from __future__ import annotations

import datetime as _dt
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.catalog import CatalogConfig
from compaction.cli import main as cli_main
from compaction.core.errors import CompactionError, ConfigError, PlanningError
from compaction.core.intervals import SpecField, interval_filter
from compaction.core.model import PartitionFieldValue, PartitionKey
from compaction.metadata.filters import compile_partition_filter, parse_row_filter
from compaction.ledger import Ledger

pyiceberg_types = pytest.importorskip("pyiceberg.types")
from pyiceberg.partitioning import PartitionField, PartitionSpec  # noqa: E402
from pyiceberg.schema import Schema  # noqa: E402
from pyiceberg.transforms import (  # noqa: E402
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
    YearTransform,
)
from pyiceberg.types import (  # noqa: E402
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
)

UTC = _dt.timezone.utc
EPOCH = _dt.date(1970, 1, 1)
# The demo table's schema (compaction.demo.workload.demo_table): days(ts) partitions.
EVENTS = Schema(NestedField(1, "id", LongType()), NestedField(2, "region", StringType()),
                NestedField(3, "ts", TimestamptzType()), NestedField(4, "amount", DecimalType(10, 2)),
                NestedField(5, "note", StringType()))


def _days(d: str) -> int:
    return (_dt.date.fromisoformat(d) - EPOCH).days


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private ICECOMPACT_HOME: the embedded catalog and the ledger of the CLI live there."""
    monkeypatch.setenv("ICECOMPACT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ICECOMPACT_CATALOG", raising=False)
    monkeypatch.delenv("ICECOMPACT_LEDGER_URL", raising=False)
    return tmp_path / "home"


def _create(name: str, schema: Schema, *fields: PartitionField, catalog: CatalogConfig | None = None) -> Any:
    loaded = (catalog or CatalogConfig.embedded()).load()
    namespace = name.split(".")[0]
    if (namespace,) not in loaded.list_namespaces():
        loaded.create_namespace(namespace)
    return loaded.create_table(name, schema, partition_spec=PartitionSpec(*fields))


def _demo(home: Path) -> Any:
    return _create("demo.events", EVENTS, PartitionField(3, 1000, DayTransform(), "ts_day"))


def _evolved(home: Path) -> Any:
    """days(ts) (spec 0), then + identity(region) + bucket(8, id) (spec 1), then ts_day dropped (spec 2)."""
    table = _demo(home)
    with table.update_spec() as update:
        update.add_field("region", IdentityTransform(), "region")
        update.add_field("id", BucketTransform(8), "id_bucket_8")
    with table.update_spec() as update:
        update.remove_field("ts_day")
    return CatalogConfig.embedded().load().load_table("demo.events")


def _key(spec: int, **values: Any) -> PartitionKey:
    return PartitionKey(spec, tuple(PartitionFieldValue(n, "x", "x", v) for n, v in values.items()))


# ------------------------------------------------------------------------------------------- the README examples
@pytest.mark.parametrize(
    ("text", "normalised", "projection"),
    [
        ("ts >= '2024-01-02'", "ts >= '2024-01-02T00:00:00+00:00'", "ts_day >= 19724"),
        ("ts >= '2024-01-02' and ts < '2024-01-04'",
         "ts >= '2024-01-02T00:00:00+00:00' and ts < '2024-01-04T00:00:00+00:00'", "ts_day >= 19724 and ts_day <= 19725"),
        ("ts between '2024-01-02T06:00:00+01:00' and '2024-01-02T23:00:00Z'",
         "ts >= '2024-01-02T05:00:00+00:00' and ts <= '2024-01-02T23:00:00+00:00'", "ts_day >= 19724 and ts_day <= 19724"),
        ("ts < '2024-01-02' or ts >= '2024-01-05'",
         "ts < '2024-01-02T00:00:00+00:00' or ts >= '2024-01-05T00:00:00+00:00'", "ts_day <= 19723 or ts_day >= 19727"),
        ("not (ts < '2024-01-03')", "ts >= '2024-01-03T00:00:00+00:00'", "ts_day >= 19725"),
        ("ts is null", "ts is null", "ts_day is null"),
        ("ts = '2024-01-03T10:15:00Z'", "ts = '2024-01-03T10:15:00+00:00'", "ts_day = 19725"),
        ("ts in ('2024-01-03T10:15:00+02:00', '2024-01-01')",
         "ts in ('2024-01-01T00:00:00+00:00', '2024-01-03T08:15:00+00:00')", "ts_day in (19723, 19725)"),
    ],
)
def test_demo_table_examples(home: Path, text: str, normalised: str, projection: str) -> None:
    flt = compile_partition_filter(_demo(home), text, table_name="demo.events")
    assert flt is not None and flt.text == normalised
    assert [(p.spec_id, p.expression.render()) for p in flt.projections] == [(0, projection)]
    again = compile_partition_filter(_demo_loaded(), flt.text, table_name="demo.events")
    assert again == flt, "the recorded normalised text compiles to the same filter"


def _demo_loaded() -> Any:
    return CatalogConfig.embedded().load().load_table("demo.events")


def test_selects_the_partitions_icebergs_projection_selects(home: Path) -> None:
    flt = compile_partition_filter(_demo(home), "ts >= '2024-01-02T12:00:00+00:00' and ts < '2024-01-04'")
    assert flt is not None
    chosen = [d for d in range(_days("2023-12-30"), _days("2024-01-08")) if flt(_key(0, ts_day=d))]
    assert chosen == [_days("2024-01-02"), _days("2024-01-03")]  # the 2nd holds rows after noon
    assert not flt(_key(0, ts_day=None))


def test_evolved_table_projects_onto_every_spec(home: Path) -> None:
    table = _evolved(home)
    flt = compile_partition_filter(table, "region = 'EU' and ts >= '2024-01-02'")
    assert flt is not None
    rendered = {p.spec_id: p.expression.render() for p in flt.projections}
    assert rendered == {0: "ts_day >= 19724", 1: "region = 'EU' and ts_day >= 19724", 2: "region = 'EU'"}
    # spec 0 has no region field: its partitions may hold EU rows, so they are selected (as Iceberg does)
    assert flt(_key(0, ts_day=_days("2024-01-03"))) and not flt(_key(0, ts_day=_days("2024-01-01")))
    assert flt(_key(2, region="EU", id_bucket_8=3)) and not flt(_key(2, region="US", id_bucket_8=3))
    ids = compile_partition_filter(table, "id in (1, 2, 3)")
    assert ids is not None
    assert {p.spec_id: p.expression.render() for p in ids.projections}[0] == "true"
    assert "id_bucket_8 in (" in {p.spec_id: p.expression.render() for p in ids.projections}[2]


def test_window_and_user_filter_are_one_row_filter(home: Path) -> None:
    table = _evolved(home)
    window = interval_filter(SpecField("ts_day", "day", "timestamptz", "ts"),
                             _dt.datetime(2024, 1, 2, tzinfo=UTC), _dt.datetime(2024, 1, 3, tzinfo=UTC))
    flt = compile_partition_filter(table, "region = 'EU'", window)
    assert flt is not None
    assert flt.text == "region = 'EU' and (ts >= '2024-01-02T00:00:00+00:00' and ts < '2024-01-03T00:00:00+00:00')"
    assert compile_partition_filter(table, None, window) == compile_partition_filter(
        table, "ts >= '2024-01-02T00:00:00+00:00' and ts < '2024-01-03T00:00:00+00:00'")
    assert compile_partition_filter(table, None, None) is None


@pytest.mark.parametrize(
    ("transform", "source_type", "start", "end", "first", "last"),
    [
        (HourTransform(), TimestampType(), _dt.datetime(1970, 1, 2, 3, tzinfo=UTC),
         _dt.datetime(1970, 1, 2, 5, tzinfo=UTC), 27, 28),
        (MonthTransform(), TimestamptzType(), _dt.datetime(2024, 1, 31, tzinfo=UTC), _dt.datetime(2024, 2, 1, tzinfo=UTC),
         648, 648),
        (MonthTransform(), TimestamptzType(), _dt.datetime(2024, 1, 31, tzinfo=UTC),
         _dt.datetime(2024, 2, 1, 1, tzinfo=UTC), 648, 649),
        (YearTransform(), TimestampType(), _dt.datetime(2023, 12, 31, tzinfo=UTC), _dt.datetime(2024, 1, 2, tzinfo=UTC),
         53, 54),
        (DayTransform(), DateType(), _dt.datetime(2024, 1, 2, 5, tzinfo=UTC), _dt.datetime(2024, 1, 3, 1, tzinfo=UTC),
         _days("2024-01-02"), _days("2024-01-03")),
        (IdentityTransform(), DateType(), _dt.datetime(2024, 3, 1, tzinfo=UTC), _dt.datetime(2024, 3, 2, tzinfo=UTC),
         _days("2024-03-01"), _days("2024-03-01")),
    ],
)
def test_data_interval_selects_exactly_the_overlapping_partitions(home: Path, transform: Any, source_type: Any,
                                                                  start: _dt.datetime, end: _dt.datetime,
                                                                  first: int, last: int) -> None:
    name = f"w.t{uuid.uuid4().hex[:6]}"
    table = _create(name, Schema(NestedField(1, "t", source_type)), PartitionField(1, 1000, transform, "t_part"))
    field = SpecField("t_part", str(transform), str(source_type), "t")
    flt = compile_partition_filter(table, None, interval_filter(field, start, end))
    assert flt is not None
    chosen = [v for v in range(first - 3, last + 4) if flt(_key(0, t_part=v))]
    assert chosen == list(range(first, last + 1)), flt.describe()


def test_pre_1970_time_projections_are_widened_like_icebergs_java_planner(home: Path) -> None:
    table = _create("pre.t", Schema(NestedField(1, "d", DateType()), NestedField(2, "ts", TimestamptzType())),
                    PartitionField(1, 1000, YearTransform(), "d_year"), PartitionField(2, 1001, HourTransform(), "ts_hour"),
                    PartitionField(1, 1002, DayTransform(), "d_day"))
    cases = {  # Projections.inclusive of Iceberg 1.10 (Java), observed
        "d = '1969-12-31'": "d_year in (-1, 0) and d_day = -1",
        "d < '1969-06-01'": "d_year <= 0 and d_day <= -215",
        "d in ('1969-12-31', '2024-01-01')": "d_year in (-1, 0, 54) and d_day in (-1, 19723)",
        "ts <= '1969-12-31T23:30:00Z'": "ts_hour <= 0",
        "ts > '1969-12-31T23:30:00Z'": "ts_hour >= -1",
    }
    for text, projection in cases.items():
        flt = compile_partition_filter(table, text)
        assert flt is not None and flt.projections[0].expression.render() == projection, text


# ------------------------------------------------------------------------------------------------ bad input
BAD = [  # (filter, error class, message fragment)
    ("ts=2024-01-02", ConfigError, "cannot parse at character 8 ('-01-02'); dates and timestamps go in single quotes"),
    ("ts_day=2024-01-05", ConfigError, "(the partition-field form ts_day=2024-01-05 is retired)"),
    ("ts_day = '2024-01-05'", ConfigError, "'ts_day' is a partition field (day(ts)) of demo.events, not a column; "
                                          "the partition-field form (e.g. ts_day=2024-01-05) is retired"),
    ("nosuch = 1", ConfigError, "unknown column 'nosuch' in demo.events; columns: id, region, ts, amount, note"),
    ("Region = 'EU'", ConfigError, "unknown column 'Region' in demo.events (did you mean 'region'?"),
    ("region = 'EU'", PlanningError, "region = 'EU' can never narrow the partitions of demo.events: column 'region' "
                                     "is not the source of any partition field (partition fields: ts_day = day(ts))"),
    ("ts >= '2024-01-02' and id = 7", PlanningError, "id = 7 can never narrow the partitions of demo.events"),
    ("ts != '2024-01-02'", PlanningError, "no partition field on 'ts' (ts_day = day(ts) in spec 0) can project"),
    ("ts = 'abc'", ConfigError, "ts = 'abc': wrong literal for column 'ts' of type timestamptz"),
    ("ts >= 5 and id = 'seven'", ConfigError, "id = 'seven': wrong literal for column 'id' of type long"),
    ("ts >= '2024-01-02' and id = 1.5", ConfigError, "id = 1.5: 1.5 is not a valid long for column 'id'"),
    ("ts >= '2024-01-02T10:00:00'", ConfigError, "column 'ts' is a timestamptz and the timestamp "
                                                "'2024-01-02T10:00:00' has no zone; write it with one, e.g. "
                                                "'2024-01-02T10:00:00+00:00'"),
    ("ts >= '2024-01-02' or", ConfigError, "cannot parse at character 22 ('end of text')"),
    ("ts >= '2024-01-02'; drop table x", ConfigError, "cannot parse at character 19 ('; drop table x')"),
    ("region like '%EU'", ConfigError, "LIKE expressions only supports wildcard, '%', at the end of a string"),
    ("   ", ConfigError, "empty"),
]


@pytest.mark.parametrize(("text", "error", "message"), BAD)
def test_bad_filters_fail_with_their_exit_code_and_message(home: Path, text: str, error: type, message: str) -> None:
    with pytest.raises(CompactionError) as info:
        compile_partition_filter(_demo(home), text, table_name="demo.events")
    assert type(info.value) is error and message in str(info.value), str(info.value)


def test_timestamp_without_zone_columns_refuse_zones(home: Path) -> None:
    table = _create("ntz.t", Schema(NestedField(1, "ts", TimestampType())), PartitionField(1, 1000, HourTransform(), "h"))
    with pytest.raises(ConfigError, match="is a timestamp \\(without zone\\) and the timestamp '2024-01-02T10:00:00Z' "
                                          "has one; write the wall-clock time without zone"):
        compile_partition_filter(table, "ts >= '2024-01-02T10:00:00Z'")
    flt = compile_partition_filter(table, "ts >= '2024-01-02'")
    assert flt is not None and flt.text == "ts >= '2024-01-02T00:00:00'"


def test_unpartitioned_tables_and_unprojectable_predicates_are_planning_errors(home: Path) -> None:
    plain = _create("u.t", EVENTS)
    with pytest.raises(PlanningError, match="u.t is not partitioned"):
        compile_partition_filter(plain, "id = 1", table_name="u.t")
    bucketed = _create("u.b", EVENTS, PartitionField(1, 1000, BucketTransform(4), "id_bucket"))
    with pytest.raises(PlanningError, match="bucket fields narrow only"):
        compile_partition_filter(bucketed, "not (id = 3)")
    assert compile_partition_filter(bucketed, "id = 3 or id is null") is not None


@pytest.mark.parametrize(("command", "text", "code", "message"), [
    ("plan", "ts=2024-01-02", 2, "error: invalid partition filter 'ts=2024-01-02': cannot parse at character 8"),
    ("plan", "nosuch = 1", 2, "error: invalid partition filter: unknown column 'nosuch' in demo.events"),
    ("run", "region = 'EU'", 4, "error: partition filter: region = 'EU' can never narrow the partitions"),
    ("run", "ts_day = 'abc'", 2, "'ts_day' is a partition field (day(ts)) of demo.events, not a column"),
    ("run", "ts >= '2024-01-02T10:00'", 2, "has no zone"),
])
def test_cli_exit_codes_and_nothing_inspected_or_recorded(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str], command: str, text: str,
                                                          code: int, message: str) -> None:
    _demo(home)
    import compaction.metadata.inspect

    def no_inspection(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("the table was inspected before the filter was checked")

    monkeypatch.setattr(compaction.metadata.inspect, "table_state", no_inspection)
    monkeypatch.setattr("compaction.ops.runner.table_state", no_inspection)
    assert cli_main([command, "demo.events", "--partition", text]) == code
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    with Ledger.open() as ledger:
        assert ledger.runs() == [], "nothing is recorded"


def test_cli_plan_prints_the_normalised_filter(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _demo(home)
    assert cli_main(["plan", "demo.events", "--partition", "ts >= '2024-01-02' and ts < '2024-01-03'", "--json"]) == 0
    import json

    doc = json.loads(capsys.readouterr().out)
    assert doc["partition_filter"]["text"] == "ts >= '2024-01-02T00:00:00+00:00' and ts < '2024-01-03T00:00:00+00:00'"
    assert doc["partition_filter"]["projections"] == [{"spec_id": 0, "expression": {
        "op": "and", "left": {"op": "gt_eq", "field": "ts_day", "type": "date", "values": [19724]},
        "right": {"op": "lt_eq", "field": "ts_day", "type": "date", "values": [19724]}}}]


# ------------------------------------------------------------------ property: the normalised text round-trips
ROUND_TRIP = Schema(NestedField(1, "i", LongType()), NestedField(2, "s", StringType()),
                    NestedField(3, "ts", TimestamptzType()), NestedField(4, "d", DateType()),
                    NestedField(5, "x", DoubleType()), NestedField(6, "dec", DecimalType(9, 2)),
                    NestedField(7, "b", BooleanType()), NestedField(8, "nts", TimestampType()))
_LITERALS = {
    "i": st.integers(-(2**40), 2**40).map(str),
    "s": st.text(alphabet="ab'%_ é", max_size=4).map(lambda v: "'" + v.replace("'", "''") + "'"),
    "ts": st.datetimes(min_value=_dt.datetime(1960, 1, 1), max_value=_dt.datetime(2100, 1, 1),
                       timezones=st.sampled_from([UTC, _dt.timezone(_dt.timedelta(hours=-7))])).map(
        lambda v: f"'{v.isoformat()}'"),
    "d": st.dates(min_value=_dt.date(1900, 1, 1), max_value=_dt.date(2200, 1, 1)).map(lambda v: f"'{v}'"),
    "x": st.floats(-1e6, 1e6, allow_nan=False).map(lambda v: format(v, ".3f")),
    "dec": st.integers(-10**6, 10**6).map(lambda v: f"{v / 100:.2f}"),
    "b": st.sampled_from(["true", "false"]),
    "nts": st.datetimes(min_value=_dt.datetime(1960, 1, 1), max_value=_dt.datetime(2100, 1, 1)).map(
        lambda v: f"'{v.isoformat()}'"),
}


@st.composite
def _filters(draw: st.DrawFn, depth: int = 0) -> str:
    if depth < 2 and draw(st.booleans()):
        joiner = draw(st.sampled_from(["and", "or"]))
        left, right = draw(_filters(depth + 1)), draw(_filters(depth + 1))
        text = f"({left}) {joiner} ({right})"
        return f"not ({text})" if draw(st.booleans()) else text
    column = draw(st.sampled_from(sorted(_LITERALS)))
    op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null", "like"]))
    if op in ("is null", "is not null"):
        return f"{column} {op}"
    if op == "like":
        return f"s like '{draw(st.text(alphabet='ab', max_size=3))}%'"
    if op in ("in", "not in"):
        values = draw(st.lists(_LITERALS[column], min_size=1, max_size=3))
        return f"{column} {op} ({', '.join(values)})"
    return f"{column} {op} {draw(_LITERALS[column])}"


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(text=_filters())
def test_property_normalised_text_compiles_to_the_same_filter(home: Path, text: str) -> None:
    table = _round_trip_table(home)
    first = compile_partition_filter(table, text)
    assert first is not None
    parse_row_filter(first.text)
    assert compile_partition_filter(table, first.text) == first, (text, first.text)


_TABLES: dict[str, Any] = {}


def _round_trip_table(home: Path) -> Any:
    """Spec 0: a transform on every column; spec 1 adds identity fields, so that every predicate can be projected."""
    if str(home) not in _TABLES:
        table = _create("rt.t", ROUND_TRIP, *[
            PartitionField(1, 1000, BucketTransform(4), "i_bucket"), PartitionField(2, 1001, TruncateTransform(2), "s_trunc"),
            PartitionField(3, 1002, HourTransform(), "ts_hour"), PartitionField(4, 1003, MonthTransform(), "d_month"),
            PartitionField(6, 1005, TruncateTransform(50), "dec_t"), PartitionField(8, 1007, DayTransform(), "nts_day")])
        with table.update_spec() as update:
            for column in ("i", "s", "ts", "d", "x", "dec", "b", "nts"):
                update.add_identity(column)
        _TABLES[str(home)] = CatalogConfig.embedded().load().load_table("rt.t")
    return _TABLES[str(home)]
