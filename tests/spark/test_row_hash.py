"""The checksum's row hash (validation level ``checksum``) tells apart the rows a rewrite could confuse."""

from __future__ import annotations

from compaction.spark.validation import _row_hash


def _hashes(spark, rows, schema):  # type: ignore[no-untyped-def]
    df = spark.createDataFrame(rows, schema)
    return [r[0] for r in df.select(_row_hash(df)).collect()]


def test_nulls_in_different_columns_hash_differently(spark) -> None:  # type: ignore[no-untyped-def]
    a_null, null_a, same = _hashes(spark, [("a", None), (None, "a"), ("a", None)], "x string, y string")
    assert a_null != null_a
    assert a_null == same


def test_every_column_and_nested_values_count(spark) -> None:  # type: ignore[no-untyped-def]
    schema = "id bigint, s struct<p: string, q: string>, m map<string, int>, l array<int>, d double"
    base = (1, ("u", None), {"k": 1}, [1, 2], 0.5)
    variants = [
        base,
        (2, ("u", None), {"k": 1}, [1, 2], 0.5),
        (1, (None, "u"), {"k": 1}, [1, 2], 0.5),  # nulls swapped inside a struct
        (1, ("u", None), {"k": 2}, [1, 2], 0.5),
        (1, ("u", None), {"k": 1}, [2, 1], 0.5),
        (1, ("u", None), {"k": 1}, [1, 2], None),
    ]
    hashes = _hashes(spark, variants, schema)
    assert len(set(hashes)) == len(variants)


def test_wide_rows_use_several_null_masks(spark) -> None:  # type: ignore[no-untyped-def]
    n = 130  # more columns than one 62-bit mask holds
    schema = ", ".join(f"c{i} int" for i in range(n))
    first = tuple([None] + [1] * (n - 1))
    far = tuple([1] * 70 + [None] + [1] * (n - 71))
    last = tuple([1] * (n - 1) + [None])
    hashes = _hashes(spark, [first, far, last, first], schema)
    assert len(set(hashes[:3])) == 3 and hashes[0] == hashes[3]
