"""The projected partition filter (pure core): evaluation rules, serialisation, errors.

Parsing, binding and projection are pyiceberg's (tests/test_filters.py); that the whole chain selects what Iceberg's
own scan planning selects is the property test in tests/spark/test_filter_property.py."""

from __future__ import annotations

import json
import math

import pytest

from compaction.core.errors import PlanningError
from compaction.core.model import PartitionFieldValue, PartitionKey, PartitionScalar
from compaction.core.partition_filter import (
    PartitionAnd,
    PartitionConstant,
    PartitionFilter,
    PartitionOr,
    PartitionPredicate,
    SpecProjection,
    expression_from_dict,
)


def _key(spec: int = 0, **values: PartitionScalar) -> PartitionKey:
    return PartitionKey(spec, tuple(PartitionFieldValue(n, "identity", n, v) for n, v in values.items()))


def _holds(pred: PartitionPredicate, value: PartitionScalar) -> bool:
    return pred.evaluate({pred.field: value})


@pytest.mark.parametrize(
    ("op", "values", "truth"),
    [  # truth for partition values 1, 5, 9 and null
        ("eq", (5,), (False, True, False, False)),
        ("not_eq", (5,), (True, False, True, True)),
        ("lt", (5,), (True, False, False, False)),
        ("lt_eq", (5,), (True, True, False, False)),
        ("gt", (5,), (False, False, True, False)),
        ("gt_eq", (5,), (False, True, True, False)),
        ("in", (1, 9), (True, False, True, False)),
        ("not_in", (1, 9), (False, True, False, True)),
        ("is_null", (), (False, False, False, True)),
        ("not_null", (), (True, True, True, False)),
        ("is_nan", (), (False, False, False, False)),
        ("not_nan", (), (True, True, True, True)),
    ],
)
def test_operators_and_null_semantics_are_icebergs(op: str, values: tuple[int, ...], truth: tuple[bool, ...]) -> None:
    pred = PartitionPredicate("x", op, "int", values)
    assert tuple(_holds(pred, v) for v in (1, 5, 9, None)) == truth


def test_strings_prefixes_decimals_floats_binary() -> None:
    assert _holds(PartitionPredicate("s", "starts_with", "string", ("EU",)), "EU-west")
    assert not _holds(PartitionPredicate("s", "starts_with", "string", ("EU",)), None)
    assert _holds(PartitionPredicate("s", "not_starts_with", "string", ("EU",)), None)
    assert _holds(PartitionPredicate("s", "lt", "string", ("b",)), "abc")
    # decimals are internal strings compared numerically
    assert _holds(PartitionPredicate("d", "gt", "decimal(5, 2)", ("9.50",)), "10.00")
    assert _holds(PartitionPredicate("d", "eq", "decimal(5, 2)", ("1.50",)), "1.5")
    # floats order like Java's Double.compare: -0.0 < 0.0, NaN above everything
    assert _holds(PartitionPredicate("f", "lt", "double", (0.0,)), -0.0)
    assert not _holds(PartitionPredicate("f", "eq", "double", (0.0,)), -0.0)
    assert _holds(PartitionPredicate("f", "gt", "double", (1e300,)), math.nan)
    assert _holds(PartitionPredicate("f", "is_nan", "double"), math.nan)
    # binary values are lower-case hex: string order is unsigned byte order
    assert _holds(PartitionPredicate("b", "gt", "binary", ("7f",)), "80") and _holds(
        PartitionPredicate("b", "lt", "binary", ("ff",)), "fe00")


def test_filter_uses_the_projection_of_the_key_spec() -> None:
    flt = PartitionFilter("region = 'EU' or ts >= '2024-01-02T00:00:00+00:00'", (
        SpecProjection(0, PartitionPredicate("ts_day", "gt_eq", "date", (19724,))),
        SpecProjection(1, PartitionOr(PartitionPredicate("ts_day", "gt_eq", "date", (19724,)),
                                      PartitionPredicate("region", "eq", "string", ("EU",)))),
        SpecProjection(2, PartitionConstant(True)),
    ))
    assert flt(_key(0, ts_day=19724)) and not flt(_key(0, ts_day=19723))
    assert flt(_key(1, ts_day=19000, region="EU")) and not flt(_key(1, ts_day=19000, region="US"))
    assert flt(_key(2)) and flt(_key(2, anything=None))
    with pytest.raises(PlanningError, match="not projected onto partition spec 3"):
        flt(_key(3))
    with pytest.raises(PlanningError, match="lacks"):
        flt(_key(0, other=1))
    assert "spec 1: ts_day >= 19724 or region = 'EU'" in flt.describe()


def test_round_trip_and_rendering() -> None:
    expr = PartitionAnd(PartitionOr(PartitionPredicate("a", "in", "long", (1, 2)), PartitionPredicate("a", "is_null", "long")),
                        PartitionPredicate("s", "not_starts_with", "string", ("it's",)))
    flt = PartitionFilter("a in (1, 2) or a is null", (SpecProjection(0, expr), SpecProjection(1, PartitionConstant(False))))
    doc = json.loads(json.dumps(flt.to_dict()))
    assert PartitionFilter.from_dict(doc) == flt
    assert expr.render() == "(a in (1, 2) or a is null) and s not starts with 'it''s'"
    assert str(flt) == flt.to_text() == "a in (1, 2) or a is null"


@pytest.mark.parametrize(
    "bad",
    [
        {"op": "like", "field": "a", "type": "long", "values": [1]},
        {"op": "eq", "field": "a", "type": "long", "values": []},
        {"op": "eq", "field": "a", "type": "long", "values": [None]},
        {"op": "is_null", "field": "a", "type": "long", "values": [1]},
        {"op": "in", "field": "a", "type": "long", "values": []},
        {"op": "eq", "field": "a", "type": "long", "values": [[1]]},
        {"op": "and", "left": {"op": "true"}},
        {"op": "not", "child": {"op": "true"}},
        "true",
    ],
)
def test_bad_documents_are_planning_errors(bad: object) -> None:
    with pytest.raises(PlanningError):
        expression_from_dict(bad)


def test_legacy_filters_are_shown_not_evaluated() -> None:
    old = {"text": "ts_day >= 2024-01-01", "conditions": [{"field": "ts_day", "op": ">=", "values": []}]}
    flt = PartitionFilter.from_dict(old)
    assert flt.legacy and flt.to_text() == "ts_day >= 2024-01-01"
    with pytest.raises(PlanningError, match="older version"):
        flt(_key(0, ts_day=1))
    with pytest.raises(PlanningError, match="empty"):
        PartitionFilter(" ", ())
    with pytest.raises(PlanningError, match="twice"):
        PartitionFilter("x", (SpecProjection(0, PartitionConstant(True)), SpecProjection(0, PartitionConstant(True))))
