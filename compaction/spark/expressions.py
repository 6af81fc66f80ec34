"""Partition keys -> Iceberg ``Expressions`` (for actions and scans) and Spark ``Column`` predicates (for reads).

No SQL text is built from values: Java expressions are built through the Iceberg API with values boxed on the Java
side, Spark predicates through the DataFrame API with literals. Partition values arrive in Iceberg's internal
representation (see :mod:`compaction.core.model`).
"""

from __future__ import annotations

import datetime as _dt
import decimal
import re
from typing import TYPE_CHECKING, Any

from compaction.core.errors import UnsupportedTableError
from compaction.core.model import PartitionFieldValue, PartitionKey
from compaction.spark import jvm as J

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

_PARAM_TRANSFORM = re.compile(r"^(bucket|truncate)\[(\d+)\]$")
_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH_TS = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _parse_transform(transform: str) -> tuple[str, int | None]:
    m = _PARAM_TRANSFORM.match(transform)
    if m:
        return m.group(1), int(m.group(2))
    if transform in ("identity", "year", "month", "day", "hour", "void"):
        return transform, None
    raise UnsupportedTableError(f"partition transform {transform!r} is not supported")


def _source_name(field: PartitionFieldValue) -> str:
    if not field.source_column:
        raise UnsupportedTableError(f"partition field {field.name!r} has no source column in the current schema")
    return field.source_column


def _java_term(spark: SparkSession, field: PartitionFieldValue) -> Any:
    exprs = J.jvm(spark).org.apache.iceberg.expressions.Expressions
    kind, arg = _parse_transform(field.transform)
    src = _source_name(field)
    if kind == "identity":
        return exprs.ref(src)
    if kind == "bucket":
        return exprs.bucket(src, arg)
    if kind == "truncate":
        return exprs.truncate(src, arg)
    return getattr(exprs, kind)(src)  # year / month / day / hour


def _boxed_value(spark: SparkSession, table: Any, field: PartitionFieldValue, spec: Any, index: int) -> Any:
    """Java Object[1] holding the value boxed as the partition field's Java type (never crosses back to Python)."""
    type_id = str(spec.partitionType().fields().get(index).type().typeId().toString())
    return J.java_objects(spark, [type_id], [field.value])


def java_partition_expression(spark: SparkSession, table: Any, key: PartitionKey) -> Any:
    """``Expressions`` selecting the files of ``key``'s partition (transform terms, e.g. ``day(ts) == 19723``).

    Note (Iceberg scan planning): the expression is projected onto *every* spec, so files written under another
    spec whose partition also satisfies it (e.g. after spec evolution) are selected too."""
    j = J.jvm(spark)
    exprs = j.org.apache.iceberg.expressions.Expressions
    spec = J.spec_for(table, key.spec_id)
    result = exprs.alwaysTrue()
    gw = J.gateway(spark)
    object_class = j.java.lang.Class.forName("java.lang.Object")
    term_class = j.java.lang.Class.forName("org.apache.iceberg.expressions.UnboundTerm")
    expressions_class = j.java.lang.Class.forName("org.apache.iceberg.expressions.Expressions")
    equal = expressions_class.getMethod("equal", J._class_array(spark, [term_class, object_class]))
    for index, field in enumerate(key.fields):
        if field.transform == "void":
            continue  # void fields always hold null and constrain nothing
        term = _java_term(spark, field)
        if field.value is None:
            predicate = exprs.isNull(term)
        else:
            boxed = _boxed_value(spark, table, field, spec, index)
            args = gw.new_array(j.java.lang.Object, 2)
            args[0] = term
            j.java.lang.System.arraycopy(boxed, 0, args, 1, 1)
            predicate = equal.invoke(None, args)
        result = getattr(exprs, "and")(result, predicate)
    return result


def _quote(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"


def _spark_literal(result_type: str, value: Any) -> Any:
    if result_type == "DATE":
        return _EPOCH_DATE + _dt.timedelta(days=int(value))
    if result_type in ("TIMESTAMP", "TIMESTAMP_NANO"):
        return None  # handled with timestamp_micros
    if result_type == "DECIMAL":
        return decimal.Decimal(str(value))
    if result_type in ("BINARY", "FIXED"):
        return bytearray(bytes.fromhex(str(value)))
    return value


def spark_partition_predicate(spark: SparkSession, table: Any, catalog_name: str, key: PartitionKey) -> Column:
    """A Spark ``Column`` predicate on rows equal to ``key``'s partition predicate, using Iceberg's ``system``
    functions for transforms (Spark pushes them down to Iceberg as the same transform filters)."""
    from pyspark.sql import functions as F

    spec = J.spec_for(table, key.spec_id)
    fields = spec.partitionType().fields()
    condition = F.lit(True)
    for index, field in enumerate(key.fields):
        kind, arg = _parse_transform(field.transform)
        if kind == "void":
            continue
        column = F.col(_quote(_source_name(field)))
        if kind == "identity":
            term = column
        elif kind in ("bucket", "truncate"):
            term = F.call_function(f"{catalog_name}.system.{kind}", F.lit(arg), column)
        else:
            term = F.call_function(f"{catalog_name}.system.{kind}s", column)
        if field.value is None:
            condition = condition & term.isNull()
            continue
        result_type = str(fields.get(index).type().typeId().toString())
        if kind == "identity" and result_type in ("TIMESTAMP", "TIMESTAMP_NANO"):
            literal = F.timestamp_micros(F.lit(int(field.value)))  # type: ignore[arg-type]
        elif kind == "day":
            literal = F.lit(_EPOCH_DATE + _dt.timedelta(days=int(field.value)))  # type: ignore[arg-type]
        else:
            literal = F.lit(_spark_literal(result_type, field.value))
        condition = condition & (term == literal)
    return condition
