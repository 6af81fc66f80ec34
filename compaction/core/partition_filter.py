"""Partition filters in their *projected* form: what the pure planner needs to select partitions.

Users write row filters on source columns in Iceberg's own language (``ts >= '2024-01-02T00:00:00+00:00' and
region = 'EU'``). Parsing, binding to the table schema and inclusive projection onto every partition spec happen at
the edge, with pyiceberg (:mod:`compaction.metadata.filters`); this module receives the result and stays stdlib-only:

* :class:`PartitionFilter` - the normalised, bound row filter as text (``text``, what is recorded in the plan and
  the ledger) plus, per partition spec of the table, the inclusive projection of that filter onto the spec's
  partition fields (:class:`SpecProjection`).
* The projected expressions are trees of :class:`PartitionPredicate` (a partition field, an operator, literals in
  Iceberg's internal representation, see :mod:`compaction.core.model`) joined by :class:`PartitionAnd` /
  :class:`PartitionOr`, or a constant :class:`PartitionConstant`. Inclusive projection has already pushed every
  ``not`` down to the leaves, so there is no ``not`` node.

Matching a :class:`PartitionKey` evaluates the projection of the key's spec on the key's values with Iceberg's
evaluation rules (the same as pyiceberg's scan planning): a null partition value satisfies ``is_null``,
``not_eq``, ``not_in``, ``not_starts_with`` and ``not_nan``, and nothing else; floats order like Java's
``Double.compare`` (``-0.0 < 0.0``, NaN greatest), decimals numerically, binary values as unsigned bytes.

Pure: stdlib only, no I/O.
"""

from __future__ import annotations

import decimal
import math
from dataclasses import dataclass
from typing import Mapping, Union

from compaction.core.errors import PlanningError
from compaction.core.model import PartitionKey, PartitionScalar

__all__ = [
    "PREDICATE_OPS",
    "PartitionPredicate",
    "PartitionAnd",
    "PartitionOr",
    "PartitionConstant",
    "PartitionExpression",
    "SpecProjection",
    "PartitionFilter",
    "expression_from_dict",
]

#: Operators of projected predicates (pyiceberg's predicate classes, snake_case).
UNARY_OPS: tuple[str, ...] = ("is_null", "not_null", "is_nan", "not_nan")
LITERAL_OPS: tuple[str, ...] = ("eq", "not_eq", "lt", "lt_eq", "gt", "gt_eq", "starts_with", "not_starts_with")
SET_OPS: tuple[str, ...] = ("in", "not_in")
PREDICATE_OPS: tuple[str, ...] = (*UNARY_OPS, *LITERAL_OPS, *SET_OPS)
_UNARY_TEXT = {"is_null": "is null", "not_null": "is not null", "is_nan": "is nan", "not_nan": "is not nan"}
_SYMBOLS = {"eq": "=", "not_eq": "!=", "lt": "<", "lt_eq": "<=", "gt": ">", "gt_eq": ">="}


def _bad(what: str, data: object) -> PlanningError:
    return PlanningError(f"bad partition filter {what}: {data!r}")


def _order_key(type_name: str, value: PartitionScalar) -> object:
    """A value comparable with Python operators the way Iceberg orders values of ``type_name``."""
    if type_name.startswith("decimal"):
        return decimal.Decimal(str(value))
    if type_name in ("float", "double"):
        number = float(value)  # type: ignore[arg-type]
        if math.isnan(number):
            return (1, 0.0, 0.0)
        return (0, number, math.copysign(1.0, number))  # -0.0 < 0.0, as Double.compare
    return value


def _render_value(value: PartitionScalar) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _scalar(value: object, what: object) -> PartitionScalar:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    raise _bad("literal", what)


@dataclass(frozen=True)
class PartitionPredicate:
    """``field op values`` on one partition field. ``type`` is the partition field's Iceberg type as pyiceberg
    prints it (``date``, ``int``, ``string``, ``decimal(10, 2)``, ...); ``values`` are in internal representation:
    none for the unary operators, one for comparisons and ``starts_with``, one or more for ``in`` / ``not_in``."""

    field: str
    op: str
    type: str
    values: tuple[PartitionScalar, ...] = ()

    def __post_init__(self) -> None:
        if self.op not in PREDICATE_OPS:
            raise _bad("operator", self.op)
        count = len(self.values)
        if (self.op in UNARY_OPS and count) or (self.op in LITERAL_OPS and count != 1) or (
            self.op in SET_OPS and not count
        ):
            raise _bad("predicate", (self.field, self.op, self.values))
        if any(v is None for v in self.values):
            raise _bad("predicate (null literal)", (self.field, self.op, self.values))

    def evaluate(self, values: Mapping[str, PartitionScalar]) -> bool:
        if self.field not in values:
            raise PlanningError(f"partition filter names partition field {self.field!r}, which the partition lacks")
        value = values[self.field]
        op = self.op
        if op == "is_null":
            return value is None
        if op == "not_null":
            return value is not None
        if op in ("is_nan", "not_nan"):
            is_nan = isinstance(value, float) and math.isnan(value)
            return is_nan if op == "is_nan" else not is_nan
        if value is None:  # Iceberg's evaluator: only the negative predicates hold for null
            return op in ("not_eq", "not_in", "not_starts_with")
        if op in ("starts_with", "not_starts_with"):
            holds = isinstance(value, str) and value.startswith(str(self.values[0]))
            return holds if op == "starts_with" else not holds
        key = _order_key(self.type, value)
        literals = [_order_key(self.type, v) for v in self.values]
        if op in ("in", "not_in"):
            found = any(key == lit for lit in literals)
            return found if op == "in" else not found
        lit = literals[0]
        if op == "eq":
            return key == lit
        if op == "not_eq":
            return key != lit
        sign = int(key > lit) - int(key < lit)  # type: ignore[operator]
        if op == "lt":
            return sign < 0
        if op == "lt_eq":
            return sign <= 0
        if op == "gt":
            return sign > 0
        return sign >= 0  # gt_eq

    def render(self) -> str:
        if self.op in UNARY_OPS:
            return f"{self.field} {_UNARY_TEXT[self.op]}"
        if self.op in SET_OPS:
            return f"{self.field} {self.op.replace('_', ' ')} ({', '.join(_render_value(v) for v in self.values)})"
        if self.op in _SYMBOLS:
            return f"{self.field} {_SYMBOLS[self.op]} {_render_value(self.values[0])}"
        return f"{self.field} {self.op.replace('_', ' ')} {_render_value(self.values[0])}"

    def to_dict(self) -> dict[str, object]:
        return {"op": self.op, "field": self.field, "type": self.type, "values": list(self.values)}


@dataclass(frozen=True)
class PartitionAnd:
    left: PartitionExpression
    right: PartitionExpression

    def evaluate(self, values: Mapping[str, PartitionScalar]) -> bool:
        return self.left.evaluate(values) and self.right.evaluate(values)

    def render(self) -> str:
        return f"{_group(self.left, PartitionOr)} and {_group(self.right, PartitionOr)}"

    def to_dict(self) -> dict[str, object]:
        return {"op": "and", "left": self.left.to_dict(), "right": self.right.to_dict()}


@dataclass(frozen=True)
class PartitionOr:
    left: PartitionExpression
    right: PartitionExpression

    def evaluate(self, values: Mapping[str, PartitionScalar]) -> bool:
        return self.left.evaluate(values) or self.right.evaluate(values)

    def render(self) -> str:
        return f"{_group(self.left, PartitionAnd)} or {_group(self.right, PartitionAnd)}"

    def to_dict(self) -> dict[str, object]:
        return {"op": "or", "left": self.left.to_dict(), "right": self.right.to_dict()}


@dataclass(frozen=True)
class PartitionConstant:
    """``true`` (the spec's fields cannot narrow the filter: every partition of the spec is selected) or
    ``false`` (no partition of the spec can hold a matching row)."""

    value: bool

    def evaluate(self, values: Mapping[str, PartitionScalar]) -> bool:
        return self.value

    def render(self) -> str:
        return "true" if self.value else "false"

    def to_dict(self) -> dict[str, object]:
        return {"op": "true" if self.value else "false"}


PartitionExpression = Union[PartitionPredicate, PartitionAnd, PartitionOr, PartitionConstant]


def _group(expr: PartitionExpression, other: type) -> str:
    text = expr.render()
    return f"({text})" if isinstance(expr, other) else text


def expression_from_dict(data: object) -> PartitionExpression:
    if not isinstance(data, Mapping):
        raise _bad("expression", data)
    op = data.get("op")
    if op in ("true", "false") and set(data) == {"op"}:
        return PartitionConstant(op == "true")
    if op in ("and", "or") and set(data) == {"op", "left", "right"}:
        cls = PartitionAnd if op == "and" else PartitionOr
        return cls(expression_from_dict(data["left"]), expression_from_dict(data["right"]))
    if op in PREDICATE_OPS and set(data) == {"op", "field", "type", "values"}:
        field, type_name, values = data["field"], data["type"], data["values"]
        if not isinstance(field, str) or not isinstance(type_name, str) or not isinstance(values, list):
            raise _bad("predicate", data)
        return PartitionPredicate(field, str(op), type_name, tuple(_scalar(v, data) for v in values))
    raise _bad("expression", data)


@dataclass(frozen=True)
class SpecProjection:
    """The inclusive projection of a row filter onto one partition spec."""

    spec_id: int
    expression: PartitionExpression

    def to_dict(self) -> dict[str, object]:
        return {"spec_id": self.spec_id, "expression": self.expression.to_dict()}


@dataclass(frozen=True)
class PartitionFilter:
    """A row filter on source columns (``text``: normalised, bound) and its projection onto every partition spec.
    Callable: ``flt(key) -> bool`` selects a partition exactly when its spec's projection holds for its values.

    A filter read from a plan recorded before projections existed has ``projections == ()`` and ``legacy=True``:
    it can be shown, not evaluated."""

    text: str
    projections: tuple[SpecProjection, ...]
    legacy: bool = False

    def __post_init__(self) -> None:
        if not self.text.strip():
            raise PlanningError("empty partition filter")
        ids = [p.spec_id for p in self.projections]
        if len(ids) != len(set(ids)):
            raise _bad("projections (spec listed twice)", ids)

    def projection(self, spec_id: int) -> PartitionExpression:
        for p in self.projections:
            if p.spec_id == spec_id:
                return p.expression
        if self.legacy:
            raise PlanningError(f"partition filter {self.text!r} was recorded by an older version and cannot be "
                                f"evaluated; plan again")
        raise PlanningError(f"partition filter {self.text!r} was not projected onto partition spec {spec_id}")

    def matches(self, key: PartitionKey) -> bool:
        expression = self.projection(key.spec_id)
        return expression.evaluate({f.name: f.value for f in key.fields})

    def __call__(self, key: PartitionKey) -> bool:
        return self.matches(key)

    def to_text(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text

    def describe(self) -> str:
        """The filter and each spec's projection, one line each (for logs)."""
        lines = [self.text]
        lines.extend(f"  spec {p.spec_id}: {p.expression.render()}" for p in self.projections)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, object]:
        return {"text": self.text, "projections": [p.to_dict() for p in self.projections]}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> PartitionFilter:
        text = data.get("text")
        if not isinstance(text, str):
            raise _bad("document", dict(data))
        if set(data) == {"text", "conditions"}:  # recorded when filters were conditions on partition fields
            return cls(text, (), legacy=True)
        projections = data.get("projections")
        if set(data) != {"text", "projections"} or not isinstance(projections, list):
            raise _bad("document", dict(data))
        out = []
        for p in projections:
            if not isinstance(p, Mapping) or set(p) != {"spec_id", "expression"}:
                raise _bad("projection", p)
            spec_id = p["spec_id"]
            if isinstance(spec_id, bool) or not isinstance(spec_id, int):
                raise _bad("projection", p)
            out.append(SpecProjection(spec_id, expression_from_dict(p["expression"])))
        return cls(text, tuple(out))
