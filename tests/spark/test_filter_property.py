"""Property: the partitions a row filter selects are the partitions of the files Iceberg's own scan planning selects.

Random small tables written by Spark (identity, days/hours/months/years, bucket and truncate fields on long, string,
date and timestamptz columns; one optional spec evolution adding or dropping a field; null partition values) and
random row filters (and/or/not, comparisons, between, in, not in, is [not] null, like 'prefix%'). For each filter:

* ours: ``compaction.metadata.filters.compile_partition_filter`` (pyiceberg parses, binds and projects it onto every spec)
  evaluated by the pure core on each partition of ``table_state``;
* Iceberg's: ``table.newScan().filter(expr).planFiles()`` through the Java API, with ``expr`` built with
  ``org.apache.iceberg.expressions.Expressions`` from the same generated tree (not from our text), each file mapped to
  its partition.

The tables are written with ``write.metadata.metrics.default=none``: without column statistics Iceberg's planner
can only prune by partition, which is the granularity we select at (with statistics it may also skip some files of
a selected partition; then our selection is a superset).

Pre-1970 values: Java widens the inclusive projection of time fields by one partition for negative projected
values (``ProjectionUtil.fixInclusiveTimeProjection``, for data of old writers); pyiceberg does not, and
``compaction.metadata.filters`` applies the same widening, so the tables here hold 1969 and 1970 values on purpose.

Equal, with one documented exception: Java's partition evaluator orders null before every value, so a null
partition value satisfies ``<`` / ``<=`` there, when the manifest holding it also holds non-null values (a manifest
with only nulls is pruned by the manifest evaluator instead). No row of such a partition can match, and pyiceberg's
evaluator (and ours) do not select it. The assertion: ours is a subset of Iceberg's, and every extra partition of
Iceberg's has a null value in a field that its spec's projection compares with ``<`` / ``<=``.

Bounded: a few tables (each one Spark commit or three) with several filters each.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from compaction.catalog import CatalogConfig
from compaction.core.errors import PlanningError
from compaction.core.model import PartitionKey, TableIdentity
from compaction.core.partition_filter import PartitionAnd, PartitionExpression, PartitionOr, PartitionPredicate
from compaction.metadata.filters import compile_partition_filter
from compaction.metadata.inspect import table_state
from compaction.spark import jvm as J

UTC = _dt.timezone.utc
TS = [_dt.datetime(1969, 12, 31, 23, 30, tzinfo=UTC), _dt.datetime(1970, 1, 1, 0, 30, tzinfo=UTC),
      _dt.datetime(2024, 1, 31, 23, 59, 59, tzinfo=UTC), _dt.datetime(2024, 2, 1, tzinfo=UTC),
      _dt.datetime(2024, 2, 1, 13, tzinfo=UTC), _dt.datetime(2024, 2, 2, 5, 15, tzinfo=UTC),
      _dt.datetime(2025, 1, 1, tzinfo=UTC)]
DATES = [_dt.date(1969, 12, 31), _dt.date(1970, 1, 1), _dt.date(2024, 1, 31), _dt.date(2024, 2, 1),
         _dt.date(2024, 12, 31)]
STRINGS = ["", "a", "ab", "abc", "b", "ba", "é"]
IDS = [-3, -2, -1, 0, 1, 2, 5, 17]
DOMAIN: dict[str, list[Any]] = {"id": IDS, "s": STRINGS, "ts": TS, "d": DATES}
FIELDS = ["days(ts)", "hours(ts)", "months(ts)", "years(d)", "months(d)", "d", "s", "truncate(2, s)",
          "bucket(3, s)", "bucket(4, id)", "truncate(3, id)", "id", "days(d)"]
_COUNTER = itertools.count()


# ------------------------------------------------------------------------------------------------ generation
def _rows(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    def value(column: str) -> Any:
        return draw(st.one_of(st.none(), st.sampled_from(DOMAIN[column])) if draw(st.integers(0, 5)) == 0
                    else st.sampled_from(DOMAIN[column]))

    return [(value("id"), value("s"), value("ts"), value("d")) for _ in range(draw(st.integers(2, 7)))]


def _clash(field: str) -> str:
    """Iceberg refuses two time transforms of one column in a spec (redundant partitions)."""
    kind, _, rest = field.partition("(")
    return f"time {rest}" if kind in ("years", "months", "days", "hours") else field


@st.composite
def tables(draw: st.DrawFn) -> dict[str, Any]:
    first = draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=2, unique_by=_clash))
    evolution: tuple[str, str] | None = None
    if draw(st.booleans()):
        if draw(st.booleans()):
            taken = {_clash(f) for f in first}
            evolution = ("ADD", draw(st.sampled_from([f for f in FIELDS if _clash(f) not in taken])))
        else:
            evolution = ("DROP", draw(st.sampled_from(first)))
    return {"fields": first, "evolution": evolution, "rows": [_rows(draw), _rows(draw)] if evolution else [_rows(draw)]}


def _literal(draw: st.DrawFn, column: str) -> Any:
    if column == "ts" and draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(DATES))  # a date alone on a timestamptz column: midnight UTC
    if column == "ts" and draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(TS)).astimezone(_dt.timezone(_dt.timedelta(hours=2)))
    return draw(st.sampled_from(DOMAIN[column]))


@st.composite
def filters(draw: st.DrawFn, columns: list[str], depth: int = 0) -> tuple[Any, ...]:
    kind = draw(st.sampled_from(["pred", "pred", "pred", "and", "or", "not"] if depth < 2 else ["pred"]))
    if kind == "not" and depth:
        kind = "pred"
    if kind in ("and", "or"):
        return (kind, draw(filters(columns, depth + 1)), draw(filters(columns, depth + 1)))
    if kind == "not":
        return ("not", draw(filters(columns, depth + 1)))
    column = draw(st.sampled_from(columns))
    ops = ["=", "!=", "<", "<=", ">", ">=", "between", "in", "not in", "is null", "is not null"]
    op = draw(st.sampled_from(ops + (["like"] if column == "s" else [])))
    if op in ("is null", "is not null"):
        return ("pred", op, column, ())
    if op == "like":
        return ("pred", op, column, (draw(st.sampled_from(["", "a", "ab", "b", "abc"])),))
    if op in ("in", "not in"):
        return ("pred", op, column, tuple(_literal(draw, column) for _ in range(draw(st.integers(1, 3)))))
    if op == "between":
        return ("pred", op, column, (_literal(draw, column), _literal(draw, column)))
    return ("pred", op, column, (_literal(draw, column),))


def _text_value(value: Any) -> str:
    if isinstance(value, int):
        return str(value)
    if isinstance(value, _dt.datetime):
        return f"'{value.isoformat()}'"
    if isinstance(value, _dt.date):
        return f"'{value.isoformat()}'"
    return "'" + str(value).replace("'", "''") + "'"


def to_text(node: tuple[Any, ...]) -> str:
    if node[0] in ("and", "or"):
        return f"({to_text(node[1])}) {node[0]} ({to_text(node[2])})"
    if node[0] == "not":
        return f"not ({to_text(node[1])})"
    _, op, column, values = node
    if op in ("is null", "is not null"):
        return f"{column} {op}"
    if op == "like":
        return f"{column} like '{values[0]}%'"
    if op in ("in", "not in"):
        return f"{column} {op} ({', '.join(_text_value(v) for v in values)})"
    if op == "between":
        return f"{column} between {_text_value(values[0])} and {_text_value(values[1])}"
    return f"{column} {op} {_text_value(values[0])}"


def _java_value(column: str, value: Any) -> Any:
    """The literal as the Java API takes it: ISO text with an explicit UTC offset for timestamptz (a date alone is
    midnight UTC, our documented rule), ISO dates, Python ints and strings (py4j boxes them)."""
    if column == "ts":
        if not isinstance(value, _dt.datetime):
            value = _dt.datetime(value.year, value.month, value.day, tzinfo=UTC)
        return value.astimezone(UTC).isoformat()
    if column == "d":
        return value.isoformat()
    return value


def to_java(spark: Any, node: tuple[Any, ...]) -> Any:
    exprs = J.jvm(spark).org.apache.iceberg.expressions.Expressions
    if node[0] in ("and", "or"):
        return getattr(exprs, node[0])(to_java(spark, node[1]), to_java(spark, node[2]))
    if node[0] == "not":
        return getattr(exprs, "not")(to_java(spark, node[1]))
    _, op, column, values = node
    java = [_java_value(column, v) for v in values]
    if op == "is null":
        return exprs.isNull(column)
    if op == "is not null":
        return exprs.notNull(column)
    if op == "like":
        return exprs.startsWith(column, java[0])
    if op in ("in", "not in"):
        items = J.jvm(spark).java.util.ArrayList()
        for v in java:
            items.add(v)
        return getattr(exprs, "in" if op == "in" else "notIn")(column, items)
    if op == "between":
        return getattr(exprs, "and")(exprs.greaterThanOrEqual(column, java[0]), exprs.lessThanOrEqual(column, java[1]))
    method = {"=": "equal", "!=": "notEqual", "<": "lessThan", "<=": "lessThanOrEqual", ">": "greaterThan",
              ">=": "greaterThanOrEqual"}[op]
    return getattr(exprs, method)(column, java[0])


# ------------------------------------------------------------------------------------------------ the tables
def _write(spark: Any, catalog: CatalogConfig, spec: dict[str, Any]) -> str:
    from pyspark.sql.types import DateType, LongType, StringType, StructField, StructType, TimestampType

    name = f"{catalog.name}.p.t{next(_COUNTER)}"
    spark.sql(f"CREATE TABLE {name} (id BIGINT, s STRING, ts TIMESTAMP, d DATE) USING iceberg "
              f"PARTITIONED BY ({', '.join(spec['fields'])}) "
              f"TBLPROPERTIES ('format-version'='2', 'write.metadata.metrics.default'='none')")
    schema = StructType([StructField("id", LongType()), StructField("s", StringType()),
                         StructField("ts", TimestampType()), StructField("d", DateType())])
    for i, rows in enumerate(spec["rows"]):
        if i == 1:
            verb, field = spec["evolution"]
            spark.sql(f"ALTER TABLE {name} {verb} PARTITION FIELD {field}")
        spark.createDataFrame(rows, schema).writeTo(name).append()
    return name


def _lt_on_null(expression: PartitionExpression, key: PartitionKey) -> bool:
    """Whether the projection compares a null field of ``key`` with ``<`` / ``<=`` (Java's null-first quirk)."""
    nulls = {f.name for f in key.fields if f.value is None}
    if isinstance(expression, (PartitionAnd, PartitionOr)):
        return _lt_on_null(expression.left, key) or _lt_on_null(expression.right, key)
    return isinstance(expression, PartitionPredicate) and expression.op in ("lt", "lt_eq") and expression.field in nulls


@pytest.fixture(scope="module")
def stats() -> dict[str, int]:
    return {"compared": 0, "exact": 0, "null_first": 0, "unprojectable": 0}


@settings(max_examples=16, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(spec=tables(), data=st.data())
def test_selected_partitions_equal_icebergs_scan_planning(spark: Any, sqlite_catalog: CatalogConfig,
                                                          stats: dict[str, int], spec: dict[str, Any],
                                                          data: st.DataObject) -> None:
    name = _write(spark, sqlite_catalog, spec)
    ns_table = tuple(name.split(".")[1:])
    table = sqlite_catalog.load().load_table(ns_table)
    state = table_state(table, TableIdentity(sqlite_catalog.name, ns_table[:1], ns_table[1]))
    key_of = {f.path: p.key for p in state.partitions for f in p.data_files}
    java_table = J.load_table(spark, name)
    fields = spec["fields"] + ([spec["evolution"][1]] if spec["evolution"] else [])
    sources = sorted({re.search(r"(\w+)\)?$", f).group(1) for f in fields})  # type: ignore[union-attr]
    for _ in range(10):  # mostly on partition source columns: other columns cannot be projected (refused)
        columns = sources if data.draw(st.integers(0, 4)) else sorted(DOMAIN)
        node = data.draw(filters(columns), label="filter")
        text = to_text(node)
        try:
            flt = compile_partition_filter(table, text)
        except PlanningError as e:  # a predicate no spec can project: refused, nothing to compare
            assert "can never narrow" in str(e)
            stats["unprojectable"] += 1
            continue
        assert flt is not None
        ours = {p.key for p in state.partitions if flt(p.key)}
        tasks = java_table.newScan().filter(to_java(spark, node)).planFiles()
        try:
            iterator = tasks.iterator()
            theirs = set()
            while iterator.hasNext():
                theirs.add(key_of[str(iterator.next().file().location())])
        finally:
            tasks.close()
        context = (spec, text, flt.describe(), sorted(k.label() for k in ours), sorted(k.label() for k in theirs))
        assert ours <= theirs, context
        extra = theirs - ours
        assert all(_lt_on_null(flt.projection(k.spec_id), k) for k in extra), context
        stats["compared"] += 1
        stats["exact" if not extra else "null_first"] += 1
        event("exact" if not extra else "Java's null-first comparison")


@pytest.mark.spark  # reads what the Spark property test above recorded
def test_the_property_compared_something(stats: dict[str, int]) -> None:
    """Runs after the property (same module): most generated filters were compared, many selections were equal."""
    print("filter property:", stats)
    assert stats["compared"] >= 30 and stats["exact"] >= 20, stats
