"""Partition filters as Iceberg users write them: row filters on source columns, projected onto partitions.

``--partition``, the DAG's ``partition_filter`` and the data-interval windows of scheduled runs are row filters in
Iceberg's own expression language (pyiceberg's :func:`pyiceberg.expressions.parser.parse`: ``and``, ``or``,
``not``, ``= == != <> < <= > >=``, ``between``, ``in``, ``not in``, ``is [not] null``, ``is [not] nan``,
``like 'prefix%'``, ``not like``; strings, dates and timestamps in single quotes) on the table's *source* columns.
This module is the edge where that happens, with pyiceberg doing the work:

1. :func:`parse_row_filter` - syntax only (no table needed); a malformed expression is a :class:`ConfigError`.
2. :func:`compile_partition_filter` - against a loaded table: every column must exist (:class:`ConfigError`,
   naming the valid columns; a partition field name such as ``ts_day`` gets the message that the short form is
   retired), literals are normalised (see "Timestamps" below) and bound to the schema (wrong literal type:
   :class:`ConfigError`), every predicate must be projectable onto at least one partition field of some spec
   (otherwise it could never narrow anything: :class:`PlanningError`), then the filter is projected inclusively
   (:func:`pyiceberg.expressions.visitors.inclusive_projection`) onto *every* partition spec of the table and
   handed to the pure core as a :class:`~compaction.core.partition_filter.PartitionFilter`, whose ``text`` is the
   normalised bound filter (what the plan and the ledger record).

Timestamps (the documented rule): on a ``timestamptz`` column a literal must carry its zone
(``'2024-01-02T10:00:00+01:00'``; ``Z`` is accepted for ``+00:00``), and a date alone (``'2024-01-02'``) means
midnight UTC of that day; a date-time without zone is rejected. On a ``timestamp`` (without zone) column a literal
must not carry a zone, and a date alone means midnight. Everything else is pyiceberg's literal conversion, except
that a fractional number against an integer column is rejected (pyiceberg would round it).
"""

from __future__ import annotations

import decimal
import re
import uuid
from typing import TYPE_CHECKING, Any, Iterator

from compaction.core.errors import ConfigError, PlanningError
from compaction.core.intervals import IntervalFilter, quote_column
from compaction.core.partition_filter import (
    PartitionAnd,
    PartitionConstant,
    PartitionExpression,
    PartitionFilter,
    PartitionOr,
    PartitionPredicate,
    SpecProjection,
)
from compaction.core.model import PartitionScalar

if TYPE_CHECKING:
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table

__all__ = ["SYNTAX_HELP", "parse_row_filter", "compile_partition_filter", "render_bound_filter"]

SYNTAX_HELP = (
    "partition filters are Iceberg row filters on source columns, e.g. \"ts >= '2024-01-02' and region = 'EU'\" "
    "(operators = != < <= > >= between, in (...), not in (...), is [not] null, is [not] nan, like 'prefix%'; "
    "and, or, not, parentheses; strings, dates and timestamps in single quotes)"
)
_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_HAS_OFFSET = re.compile(r"([+-]\d{2}:?\d{2}|[zZ])$")
_TIME_PART = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]")
_UNARY = {"IsNull": "is null", "NotNull": "is not null", "IsNaN": "is nan", "NotNaN": "is not nan"}
_SYMBOL = {"EqualTo": "=", "NotEqualTo": "!=", "LessThan": "<", "LessThanOrEqual": "<=", "GreaterThan": ">",
           "GreaterThanOrEqual": ">="}
_CORE_OP = {"IsNull": "is_null", "NotNull": "not_null", "IsNaN": "is_nan", "NotNaN": "not_nan", "EqualTo": "eq",
            "NotEqualTo": "not_eq", "LessThan": "lt", "LessThanOrEqual": "lt_eq", "GreaterThan": "gt",
            "GreaterThanOrEqual": "gt_eq", "StartsWith": "starts_with", "NotStartsWith": "not_starts_with",
            "In": "in", "NotIn": "not_in"}


# ------------------------------------------------------------------------------------------------------ parse
def parse_row_filter(text: str) -> BooleanExpression:
    """Parse ``text`` with pyiceberg's row-filter parser. Raises :class:`ConfigError` naming the position."""
    from pyparsing import ParseException

    from pyiceberg.expressions.parser import parse

    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"invalid partition filter {text!r}: empty; {SYNTAX_HELP}")
    try:
        return parse(text)
    except ParseException as e:
        at = max(0, min(int(e.loc), len(text)))
        rest = text[at:at + 24] or "end of text"
        hint = ""
        if re.search(r"[=<>]\s*\d{4}-\d{2}-\d{2}", text):
            hint = ("; dates and timestamps go in single quotes, on the source column: \"ts >= '2024-01-05' and "
                    "ts < '2024-01-06'\" (the partition-field form ts_day=2024-01-05 is retired)")
        raise ConfigError(f"invalid partition filter {text!r}: cannot parse at character {at + 1} ({rest!r})"
                          f"{hint}; {SYNTAX_HELP}") from e
    except (ValueError, TypeError) as e:  # e.g. LIKE with a wildcard elsewhere than at the end
        raise ConfigError(f"invalid partition filter {text!r}: {e}; {SYNTAX_HELP}") from e


# --------------------------------------------------------------------------------------------- expression walks
def _predicates(expr: Any) -> Iterator[Any]:
    from pyiceberg.expressions import And, Not, Or

    if isinstance(expr, (And, Or)):
        yield from _predicates(expr.left)
        yield from _predicates(expr.right)
    elif isinstance(expr, Not):
        yield from _predicates(expr.child)
    elif hasattr(expr, "term"):
        yield expr


def _rebuild(expr: Any, leaf: Any) -> Any:
    """``expr`` with every predicate replaced by ``leaf(predicate)``."""
    from pyiceberg.expressions import And, Not, Or

    if isinstance(expr, And):
        return And(_rebuild(expr.left, leaf), _rebuild(expr.right, leaf))
    if isinstance(expr, Or):
        return Or(_rebuild(expr.left, leaf), _rebuild(expr.right, leaf))
    if isinstance(expr, Not):
        return Not(_rebuild(expr.child, leaf))
    if hasattr(expr, "term"):
        return leaf(expr)
    return expr


def _op_name(pred: Any) -> str:
    name = type(pred).__name__
    return name[5:] if name.startswith("Bound") else name


def _unbound_text(pred: Any) -> str:
    """A predicate as the user wrote it (roughly), for messages."""
    name = quote_column(pred.term.name)
    op = _op_name(pred)
    if op in _UNARY:
        return f"{name} {_UNARY[op]}"
    if hasattr(pred, "literals"):
        values = ", ".join(_text_value(lit.value) for lit in pred.literals)
        return f"{name} {'not in' if op == 'NotIn' else 'in'} ({values})"
    value = _text_value(pred.literal.value)
    if op in ("StartsWith", "NotStartsWith"):
        return f"{name} {'not like' if op == 'NotStartsWith' else 'like'} {value[:-1]}%'"
    return f"{name} {_SYMBOL.get(op, op)} {value}"


def _text_value(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    return str(value)


# ------------------------------------------------------------------------------------------------- compile
def compile_partition_filter(
    table: Table,
    text: str | None = None,
    window: IntervalFilter | None = None,
    *,
    table_name: str | None = None,
) -> PartitionFilter | None:
    """The user's filter ``text`` and the data-interval ``window`` (both optional, combined with ``and``) bound to
    ``table``'s current schema and projected onto each of its partition specs. ``None`` when both are ``None``.

    Raises :class:`ConfigError` (malformed, unknown column, wrong literal type, timestamp zone) or
    :class:`PlanningError` (a predicate no partition spec can project) before anything is read but metadata."""
    from pyiceberg.expressions import And

    parts = []
    if text is not None:  # an explicit empty filter is an error (callers map "no filter" to None)
        parts.append(parse_row_filter(text))
    if window is not None:
        parts.append(_window_expression(window))
    if not parts:
        return None
    expr = parts[0] if len(parts) == 1 else And(parts[0], parts[1])
    name = table_name or ".".join(table.name()) or "the table"
    schema = table.schema()
    specs = list(table.metadata.partition_specs)
    _check_columns(expr, schema, specs, name)
    expr = _rebuild(expr, lambda p: _normalise_literal(p, schema))
    bound = _bind(expr, schema)
    _check_projectable(bound, schema, specs, name)
    normalised = render_bound_filter(bound, schema)
    projections = tuple(_project(expr, schema, spec, name) for spec in sorted(specs, key=lambda s: s.spec_id))
    return PartitionFilter(normalised, projections)


def _window_expression(window: IntervalFilter) -> BooleanExpression:
    from pyiceberg.expressions import And, GreaterThanOrEqual, LessThan, LessThanOrEqual, Reference
    from pyiceberg.expressions.literals import StringLiteral

    classes = {">=": GreaterThanOrEqual, "<": LessThan, "<=": LessThanOrEqual}
    preds = [classes[c.op](Reference(c.column), StringLiteral(c.literal)) for c in window.conditions]
    out = preds[0]
    for p in preds[1:]:
        out = And(out, p)
    return out


def _columns(schema: Schema) -> list[str]:
    return list(schema.column_names)


def _check_columns(expr: Any, schema: Schema, specs: list[Any], table_name: str) -> None:
    for pred in _predicates(expr):
        column = pred.term.name
        try:
            schema.find_field(column, case_sensitive=True)
            continue
        except ValueError:
            pass
        partition_fields = {pf.name: (spec, pf) for spec in specs for pf in spec.fields}
        if column in partition_fields:
            spec, pf = partition_fields[column]
            try:
                source = schema.find_column_name(pf.source_id) or str(pf.source_id)
            except ValueError:
                source = str(pf.source_id)
            raise ConfigError(
                f"invalid partition filter: {column!r} is a partition field ({pf.transform}({source})) of "
                f"{table_name}, not a column; the partition-field form (e.g. ts_day=2024-01-05) is retired: write the "
                f"filter on the source column {source!r} and it is projected onto every partition spec, e.g. "
                + _example_for(str(pf.transform), source)
            )
        similar = [c for c in _columns(schema) if c.lower() == column.lower()]
        hint = f" (did you mean {similar[0]!r}? names are case-sensitive)" if similar else ""
        raise ConfigError(f"invalid partition filter: unknown column {column!r} in {table_name}{hint}; "
                          f"columns: {', '.join(_columns(schema))}")


def _example_for(transform: str, source: str) -> str:
    column = quote_column(source)
    if transform in ("day", "month", "year", "hour"):
        return f"\"{column} >= '2024-01-05' and {column} < '2024-01-06'\""
    return f"\"{column} = <value>\""


def _normalise_literal(pred: Any, schema: Schema) -> Any:
    """Apply the timestamp rule (module docstring) and refuse fractional numbers for integer columns."""
    from pyiceberg.expressions.literals import DecimalLiteral, StringLiteral
    from pyiceberg.types import IntegerType, LongType

    field = schema.find_field(pred.term.name, case_sensitive=True)
    type_name = str(field.field_type)
    literals = list(pred.literals) if hasattr(pred, "literals") else [pred.literal] if hasattr(pred, "literal") else []
    if not literals:
        return pred
    changed = []
    for lit in literals:
        if isinstance(lit, DecimalLiteral) and isinstance(field.field_type, (IntegerType, LongType)):
            if lit.value != lit.value.to_integral_value():
                raise ConfigError(f"invalid partition filter: {_unbound_text(pred)}: {format(lit.value, 'f')} is not "
                                  f"a valid {type_name} for column {pred.term.name!r}")
        if isinstance(lit, StringLiteral) and type_name.startswith("timestamp"):
            lit = StringLiteral(_timestamp_text(lit.value, type_name, pred))
        changed.append(lit)
    if hasattr(pred, "literals"):
        return type(pred)(pred.term, changed)
    return type(pred)(pred.term, changed[0])


def _timestamp_text(value: str, type_name: str, pred: Any) -> str:
    with_zone = type_name.startswith("timestamptz")
    text = value.strip()
    if _DATE_ONLY.match(text):
        return f"{text}T00:00:00{'+00:00' if with_zone else ''}"
    if not _TIME_PART.match(text):
        return value  # not a timestamp at all: pyiceberg's conversion error names it
    has_zone = bool(_HAS_OFFSET.search(text))
    column = pred.term.name
    if with_zone and not has_zone:
        raise ConfigError(
            f"invalid partition filter: {_unbound_text(pred)}: column {column!r} is a {type_name} and the timestamp "
            f"{value!r} has no zone; write it with one, e.g. '{text.replace(' ', 'T')}+00:00' (or Z); a date alone "
            f"('{text[:10]}') means midnight UTC")
    if not with_zone and has_zone:
        raise ConfigError(
            f"invalid partition filter: {_unbound_text(pred)}: column {column!r} is a {type_name} (without zone) and "
            f"the timestamp {value!r} has one; write the wall-clock time without zone, e.g. "
            f"'{text[:19].replace(' ', 'T')}'")
    if text[-1:] in ("z", "Z"):
        text = text[:-1] + "+00:00"
    return text


def _bind(expr: Any, schema: Schema) -> Any:
    from pyiceberg.expressions.visitors import bind, rewrite_not

    try:
        return bind(schema, rewrite_not(expr), case_sensitive=True)
    except (ValueError, TypeError) as e:
        first = e
    for pred in _predicates(expr):  # name the predicate whose literal does not fit its column
        try:
            bind(schema, pred, case_sensitive=True)
        except (ValueError, TypeError) as e:
            field = schema.find_field(pred.term.name, case_sensitive=True)
            raise ConfigError(f"invalid partition filter: {_unbound_text(pred)}: wrong literal for column "
                              f"{pred.term.name!r} of type {field.field_type} ({e})") from e
    raise ConfigError(f"invalid partition filter: {first}") from first


def _check_projectable(bound: Any, schema: Schema, specs: list[Any], table_name: str) -> None:
    if all(spec.is_unpartitioned() for spec in specs):
        raise PlanningError(f"partition filter cannot select anything: {table_name} is not partitioned "
                            f"(compact it without --partition / partition_filter)")
    for pred in _predicates(bound):
        field_id = pred.term.ref().field.field_id
        parts = [(spec, pf) for spec in specs for pf in spec.fields if pf.source_id == field_id]
        if any(pf.transform.project(pf.name, pred) is not None for _, pf in parts):
            continue
        column = schema.find_column_name(field_id)
        text = render_bound_filter(pred, schema)
        if not parts:
            fields = ", ".join(sorted({f"{pf.name} = {pf.transform}({schema.find_column_name(pf.source_id)})"
                                       for spec in specs for pf in spec.fields}))
            raise PlanningError(f"partition filter: {text} can never narrow the partitions of {table_name}: column "
                                f"{column!r} is not the source of any partition field (partition fields: {fields})")
        how = ", ".join(sorted({f"{pf.name} = {pf.transform}({column}) in spec {spec.spec_id}" for spec, pf in parts}))
        raise PlanningError(f"partition filter: {text} can never narrow the partitions of {table_name}: no partition "
                            f"field on {column!r} ({how}) can project this predicate (bucket fields narrow only =, "
                            f"in, is null, is not null; time and truncate fields narrow comparisons)")


def _project(expr: Any, schema: Schema, spec: Any, table_name: str) -> SpecProjection:
    from pyiceberg.expressions.visitors import bind, inclusive_projection
    from pyiceberg.schema import Schema as _Schema

    try:
        projected = _pre_epoch_fix(inclusive_projection(schema, spec, case_sensitive=True)(expr), spec, schema)
        partition_schema = _Schema(*spec.partition_type(schema).fields)
        bound = bind(partition_schema, projected, case_sensitive=True)
    except (ValueError, TypeError) as e:
        raise PlanningError(f"cannot project the partition filter onto partition spec {spec.spec_id} of "
                            f"{table_name}: {e}") from e
    return SpecProjection(spec.spec_id, _to_core(bound))


def _pre_epoch_fix(projected: Any, spec: Any, schema: Schema) -> Any:
    """Iceberg Java's ``ProjectionUtil.fixInclusiveTimeProjection``, which pyiceberg 0.12 lacks: old writers put
    pre-1970 values of time partition fields one unit too high, so Java's inclusive projection also selects the next
    partition for a negative projected value (``<`` / ``<=``: bound + 1; ``=`` / ``in``: value and value + 1), on
    ``year``/``month``/``day``/``hour`` fields of timestamps and ``year``/``month`` fields of dates (``day`` of a date
    is exact). Applied to pyiceberg's projection so that we select what Iceberg's scan planning selects (checked
    against Java in tests/spark/test_filter_property.py)."""
    from pyiceberg.expressions import And, EqualTo, In, LessThan, LessThanOrEqual, Or
    from pyiceberg.expressions.literals import literal
    from pyiceberg.transforms import DayTransform, HourTransform, MonthTransform, YearTransform

    from pyiceberg.types import DateType

    def affected(pf: Any) -> bool:
        if isinstance(pf.transform, DayTransform):
            try:
                return not isinstance(schema.find_field(pf.source_id).field_type, DateType)
            except ValueError:  # source column dropped: widen (a superset is always safe)
                return True
        return isinstance(pf.transform, (YearTransform, MonthTransform, HourTransform))

    time_fields = {pf.name for pf in spec.fields if affected(pf)}

    def fix(expr: Any) -> Any:
        if isinstance(expr, And):
            return And(fix(expr.left), fix(expr.right))
        if isinstance(expr, Or):
            return Or(fix(expr.left), fix(expr.right))
        if not hasattr(expr, "term") or expr.term.name not in time_fields:
            return expr
        if isinstance(expr, (LessThan, LessThanOrEqual)) and expr.literal.value < 0:
            return type(expr)(expr.term, literal(expr.literal.value + 1))
        if isinstance(expr, EqualTo) and expr.literal.value < 0:
            return In(expr.term, {literal(expr.literal.value), literal(expr.literal.value + 1)})
        if isinstance(expr, In) and any(lit.value < 0 for lit in expr.literals):
            values = {lit.value for lit in expr.literals} | {lit.value + 1 for lit in expr.literals if lit.value < 0}
            return In(expr.term, {literal(v) for v in values})
        return expr

    return fix(projected)


def _to_core(bound: Any) -> PartitionExpression:
    from pyiceberg.expressions import AlwaysFalse, AlwaysTrue, And, Or

    if isinstance(bound, And):
        return PartitionAnd(_to_core(bound.left), _to_core(bound.right))
    if isinstance(bound, Or):
        return PartitionOr(_to_core(bound.left), _to_core(bound.right))
    if isinstance(bound, AlwaysTrue):
        return PartitionConstant(True)
    if isinstance(bound, AlwaysFalse):
        return PartitionConstant(False)
    field = bound.term.ref().field
    type_name = str(field.field_type)
    op = _CORE_OP[_op_name(bound)]
    if hasattr(bound, "literals"):
        values = sorted({_internal(type_name, lit.value) for lit in bound.literals}, key=repr)
    elif hasattr(bound, "literal"):
        values = [_internal(type_name, bound.literal.value)]
    else:
        values = []
    return PartitionPredicate(field.name, op, type_name, tuple(values))


def _internal(type_name: str, value: Any) -> PartitionScalar:
    """A literal's value in the internal representation of :mod:`compaction.core.model`."""
    if isinstance(value, (bytes, bytearray)):
        return str(uuid.UUID(bytes=bytes(value))) if type_name == "uuid" else bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise PlanningError(f"unsupported literal {value!r} of type {type_name} in a partition filter")


# --------------------------------------------------------------------------------------------------- render
def render_bound_filter(bound: Any, schema: Schema) -> str:
    """A bound expression as row-filter text that :func:`parse_row_filter` reads back to the same bound form:
    source column names, literals in their column's canonical form (timestamps with their zone, in UTC)."""
    from pyiceberg.expressions import AlwaysFalse, AlwaysTrue, And, Or

    if isinstance(bound, AlwaysTrue):
        return "true"
    if isinstance(bound, AlwaysFalse):
        return "false"
    if isinstance(bound, And):
        return f"{_grouped(bound.left, schema)} and {_grouped(bound.right, schema)}"
    if isinstance(bound, Or):
        return f"{_grouped(bound.left, schema)} or {_grouped(bound.right, schema)}"
    field = bound.term.ref().field
    column = quote_column(schema.find_column_name(field.field_id) or field.name)
    op = _op_name(bound)
    if op in _UNARY:
        return f"{column} {_UNARY[op]}"
    if hasattr(bound, "literals"):
        values = sorted(bound.literals, key=lambda lit: lit.value)
        return f"{column} {'not in' if op == 'NotIn' else 'in'} ({', '.join(_literal_text(field.field_type, lit.value) for lit in values)})"
    value = bound.literal.value
    if op in ("StartsWith", "NotStartsWith"):
        prefix = str(value).replace("'", "''").replace("%", "\\%")
        return f"{column} {'not like' if op == 'NotStartsWith' else 'like'} '{prefix}%'"
    return f"{column} {_SYMBOL[op]} {_literal_text(field.field_type, value)}"


def _grouped(expr: Any, schema: Schema) -> str:
    from pyiceberg.expressions import And, Or

    text = render_bound_filter(expr, schema)
    return f"({text})" if isinstance(expr, (And, Or)) else text


def _literal_text(field_type: Any, value: Any) -> str:
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import (
        BooleanType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        StringType,
        UUIDType,
    )

    if isinstance(field_type, BooleanType):
        return "true" if value else "false"
    if isinstance(field_type, (IntegerType, LongType)):
        return str(int(value))
    if isinstance(field_type, (FloatType, DoubleType)):
        text = format(decimal.Decimal(repr(float(value))), "f")
        return text if "." in text else text + ".0"
    if isinstance(field_type, DecimalType):
        return format(decimal.Decimal(value), "f")
    if isinstance(field_type, StringType):
        return "'" + str(value).replace("'", "''") + "'"
    if isinstance(field_type, UUIDType):
        return "'" + str(uuid.UUID(bytes=bytes(value)) if isinstance(value, (bytes, bytearray)) else value) + "'"
    human = IdentityTransform().to_human_string(field_type, value)  # dates, times, timestamps (UTC, with zone)
    return "'" + human.replace("'", "''") + "'"
