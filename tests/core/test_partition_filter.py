from __future__ import annotations

import datetime as dt
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.core.errors import PlanningError
from compaction.core.model import PartitionFieldValue, PartitionKey, PartitionScalar
from compaction.core.partition_filter import (
    FilterCondition,
    FilterLiteral,
    PartitionFilter,
    parse_partition_filter,
)

def D(s: str) -> int:
    return (dt.date.fromisoformat(s) - dt.date(1970, 1, 1)).days


def key(*fields: tuple[str, str, str, PartitionScalar], spec: int = 1) -> PartitionKey:
    return PartitionKey(spec, tuple(PartitionFieldValue(n, t, s, v) for n, t, s, v in fields))


def region(v: PartitionScalar) -> PartitionKey:
    return key(("region", "identity", "region", v))


def day(d: str) -> PartitionKey:
    return key(("ts_day", "day", "ts", D(d)), ("region", "identity", "region", "EU"))


def bucket(b: int) -> PartitionKey:
    return key(("id_bucket", "bucket[8]", "id", b))


def test_examples_parse_to_triples() -> None:
    assert parse_partition_filter("region=EU").conjuncts() == [("region", "=", "EU")]
    assert parse_partition_filter("ts_day=2024-01-05").conjuncts() == [("ts_day", "=", dt.date(2024, 1, 5))]
    assert parse_partition_filter("ts_day>=2024-01-01 and ts_day<2024-02-01").conjuncts() == [
        ("ts_day", ">=", dt.date(2024, 1, 1)),
        ("ts_day", "<", dt.date(2024, 2, 1)),
    ]
    assert parse_partition_filter("id_bucket in (1,2)").conjuncts() == [("id_bucket", "in", (1, 2))]
    assert parse_partition_filter("region is null").conjuncts() == [("region", "is_null", None)]
    assert parse_partition_filter("region IS NOT NULL AND x != -1.5").conjuncts() == [
        ("region", "not_null", None),
        ("x", "!=", -1.5),
    ]
    assert parse_partition_filter("a <= 'it''s' and b > \"q\" and c = true").conjuncts() == [
        ("a", "<=", "it's"),
        ("b", ">", "q"),
        ("c", "=", True),
    ]


def test_identity_string_matching_and_null_semantics() -> None:
    f = parse_partition_filter("region=EU")
    assert f(region("EU")) and not f(region("US")) and not f(region(None))
    ne = parse_partition_filter("region != EU")
    assert ne(region("US")) and not ne(region("EU")) and not ne(region(None))
    assert parse_partition_filter("region is null")(region(None))
    assert not parse_partition_filter("region is null")(region("EU"))
    assert parse_partition_filter("region is not null")(region("EU"))
    assert not parse_partition_filter("region is not null")(region(None))
    assert not parse_partition_filter("region in (EU, US)")(region(None))
    assert parse_partition_filter("region in ('EU', US)")(region("US"))


def test_day_transform_date_range() -> None:
    f = parse_partition_filter("ts_day>=2024-01-01 and ts_day<2024-02-01")
    assert f(day("2024-01-01")) and f(day("2024-01-31"))
    assert not f(day("2023-12-31")) and not f(day("2024-02-01"))
    assert parse_partition_filter("ts_day=2024-01-05")(day("2024-01-05"))
    assert not parse_partition_filter("ts_day=2024-01-05")(day("2024-01-06"))
    # the raw internal value works too
    assert parse_partition_filter(f"ts_day = {D('2024-01-05')}")(day("2024-01-05"))
    # combined with another field of the same key
    assert parse_partition_filter("ts_day=2024-01-05 and region=EU")(day("2024-01-05"))
    assert not parse_partition_filter("ts_day=2024-01-05 and region=US")(day("2024-01-05"))


def test_identity_date_int_and_string_dates() -> None:
    as_int = key(("d", "identity", "d", D("2024-03-01")))
    assert parse_partition_filter("d = 2024-03-01")(as_int)
    assert parse_partition_filter("d < 2024-03-02")(as_int)
    as_str = key(("d", "identity", "d", "2024-03-01"))
    assert parse_partition_filter("d = 2024-03-01")(as_str)
    assert parse_partition_filter("d > '2024-02-28'")(as_str)


def test_bucket_in_and_numeric_comparisons() -> None:
    f = parse_partition_filter("id_bucket in (1,2)")
    assert f(bucket(1)) and f(bucket(2)) and not f(bucket(3))
    assert parse_partition_filter("id_bucket >= 2")(bucket(5))
    assert not parse_partition_filter("id_bucket >= 2")(bucket(1))
    # a quoted string is not a number: incomparable -> false
    assert not parse_partition_filter("id_bucket = '1'")(bucket(1))
    # decimals (internal representation: str) compare numerically with numbers
    dec = key(("price", "identity", "price", "10.50"))
    assert parse_partition_filter("price = 10.5")(dec)
    assert parse_partition_filter("price > 9")(dec)
    # numbers against a non-numeric string compare as text
    assert parse_partition_filter("region = 1")(region("1"))


def test_lookup_by_source_column_for_identity_only() -> None:
    k = key(("region_part", "identity", "region", "EU"), ("id_bucket", "bucket[8]", "id", 3))
    assert parse_partition_filter("region = EU")(k)
    assert parse_partition_filter("region_part = EU")(k)
    # `id` is the source of a bucket transform, not identity: not addressable by source name
    assert not parse_partition_filter("id = 3")(k)


def test_absent_field_does_not_match() -> None:
    unpartitioned = PartitionKey(0, ())
    assert not parse_partition_filter("region = EU")(unpartitioned)
    assert not parse_partition_filter("region is null")(unpartitioned)
    assert not parse_partition_filter("ts_day >= 2024-01-01")(region("EU"))


def test_bool_partition_values() -> None:
    k = key(("flag", "identity", "flag", True))
    assert parse_partition_filter("flag = true")(k)
    assert not parse_partition_filter("flag = false")(k)
    assert not parse_partition_filter("flag = 1")(k)


@pytest.mark.parametrize(
    "text,token",
    [
        ("region=EU; drop table t", ";"),
        ("region=EU or 1=1", "or"),
        ("region == EU", "=="),
        ("region <> EU", "<>"),
        ("region => EU", "=>"),
        ("region = 'EU", "'EU"),
        ("region = \"EU", '"EU'),
        ("region like 'E%'", "like"),
        ("region=EU and", "end of input"),
        ("(region=EU)", "("),
        ("region = null", "null"),
        ("region=EU -- comment", "--"),
        ("region=EU /* c */", "/*"),
        ("region in ()", ")"),
        ("region in (1, 2", "end of input"),
        ("region in 1", "1"),
        ("region is nul", "nul"),
        ("region is not EU", "EU"),
        ("1abc = 3", "1abc"),
        ("not region = EU", "not"),
        ("region = EU region = US", "region"),
        ("region = select", "select"),
        ("ts_day = 2024-13-45", "2024-13-45"),
        ("x = 1e999", "1e999"),
        ("region = EU*", "*"),
        ("region", "end of input"),
        ("region = EU and and x = 1", "and"),
        ("region between 1 and 2", "between"),
    ],
)
def test_rejects_with_token_in_message(text: str, token: str) -> None:
    with pytest.raises(PlanningError) as exc:
        parse_partition_filter(text)
    assert token in str(exc.value)
    assert exc.value.exit_code == 4


@pytest.mark.parametrize("text", ["", "   "])
def test_rejects_empty(text: str) -> None:
    with pytest.raises(PlanningError, match="empty"):
        parse_partition_filter(text)


def test_dict_round_trip_and_text() -> None:
    f = parse_partition_filter("ts_day>=2024-01-01 and id_bucket in (1, 2) and region is null and r='a''b'")
    d = f.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert PartitionFilter.from_dict(json.loads(json.dumps(d))) == f
    assert parse_partition_filter(f.to_text()) == f
    assert d["text"] == "ts_day >= 2024-01-01 and id_bucket in (1, 2) and region is null and r = 'a''b'"
    with pytest.raises(PlanningError):
        PartitionFilter.from_dict({"conditions": [{"field": "x", "op": "like", "values": []}]})
    with pytest.raises(PlanningError):
        PartitionFilter.from_dict({"conditions": [{"field": "x", "op": "=", "values": []}]})
    with pytest.raises(PlanningError):
        PartitionFilter.from_dict({"conditions": []})


# --- property: render -> parse is the identity ------------------------------------------------------------------

_idents = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda s: s not in {"and", "or", "not", "in", "is", "null", "like", "select", "from", "where", "union", "drop",
                        "delete", "insert", "update", "case", "when", "then", "else", "end", "all", "any", "xor",
                        "ilike", "rlike", "regexp", "between", "exists"}
)  # fmt: skip
_literals = st.one_of(
    st.integers(-(10**12), 10**12).map(lambda i: FilterLiteral("int", str(i))),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda x: FilterLiteral("float", repr(x))),
    st.text(max_size=8).map(lambda s: FilterLiteral("str", s)),
    st.booleans().map(lambda b: FilterLiteral("bool", "true" if b else "false")),
    st.dates().map(lambda d: FilterLiteral("date", d.isoformat())),
)
_conditions = st.one_of(
    st.builds(lambda f, o, v: FilterCondition(f, o, (v,)), _idents, st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), _literals),
    st.builds(lambda f, vs: FilterCondition(f, "in", tuple(vs)), _idents, st.lists(_literals, min_size=1, max_size=4)),
    st.builds(lambda f, o: FilterCondition(f, o), _idents, st.sampled_from(["is_null", "not_null"])),
)


@settings(max_examples=100, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(conds=st.lists(_conditions, min_size=1, max_size=5))
def test_render_parse_round_trip(conds: list[FilterCondition]) -> None:
    f = PartitionFilter(tuple(conds))
    assert parse_partition_filter(f.to_text()) == f
    assert PartitionFilter.from_dict(json.loads(json.dumps(f.to_dict()))) == f
